"""Knobs of a chunker used inside another one (ast/endpoint fallbacks, by_type routes), validated with
messages that name the field of the outer chunker rather than the inner model's own field names."""
from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from kbench.chunking.registry import CHUNKERS
from kbench.registry import StrictModel, UnknownNameError


def nested_params(name: str, values: dict[str, Any], field: str, knobs_field: str) -> StrictModel:
    """The params model of chunker ``name``; ValueError naming ``field`` / ``knobs_field`` otherwise."""
    try:
        entry = CHUNKERS.get(name)
    except UnknownNameError as e:
        raise ValueError(f"{field}: unknown chunker {name!r}; allowed: {', '.join(e.allowed)}") from None
    try:
        return entry.params(**values)
    except ValidationError as e:
        problems = []
        for err in e.errors():
            where = ".".join(str(p) for p in err.get("loc", ()))
            if err.get("type") == "extra_forbidden":
                problems.append(f"{knobs_field}.{where}: unknown knob of {name}; allowed: "
                                f"{', '.join(entry.params.model_fields)}")
            else:
                message = err.get("ctx", {}).get("error", err.get("msg"))
                problems.append(f"{knobs_field}.{where}: {message}" if where else f"{knobs_field}: {message}")
        raise ValueError("; ".join(problems)) from None
