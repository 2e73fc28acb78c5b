"""The error a user can fix, and how pydantic's validation errors become one line each.

Every config problem is a ``ConfigError`` whose message names the field path, the bad value and what is
allowed; the CLI prints it without a traceback and exits 2.
"""
from __future__ import annotations

from typing import Any


class ConfigError(ValueError):
    """A config (or other user input) that cannot run. The message lists every problem, one per line."""


def owner_model(model: type | None, loc: tuple) -> type | None:
    """Follow a pydantic error location down nested models to the model that owns the last key."""
    for part in loc:
        if model is None or not hasattr(model, "model_fields"):
            return None
        field = model.model_fields.get(part) if isinstance(part, str) else None
        if field is None:
            return None
        ann = field.annotation
        model = ann if hasattr(ann, "model_fields") else None
    return model


def format_error(err: dict[str, Any], prefix: str, root: type | None) -> str:
    """One pydantic error -> ``path: what is wrong (got value); allowed: ...``."""
    loc = tuple(err.get("loc", ()))
    path = ".".join(str(p) for p in ((prefix,) if prefix else ()) + loc)
    kind = err.get("type", "")
    if kind == "extra_forbidden":
        owner = owner_model(root, loc[:-1])
        allowed = ", ".join(owner.model_fields) if owner is not None else "see the docs"
        return f"{path}: unknown key; allowed keys: {allowed}"
    if kind == "value_error":
        msg = str(err.get("ctx", {}).get("error", err.get("msg")))
        return msg if not loc else f"{path}: {msg}"
    if kind == "missing":
        return f"{path}: required field missing"
    bad = err.get("input")
    expected = err.get("ctx", {}).get("expected")
    tail = f"; allowed: {expected}" if expected else ""
    return f"{path}: {err.get('msg')} (got {bad!r}){tail}"
