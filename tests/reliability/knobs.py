"""Every number knob of a config, found by walking the section models and each registry's params models.

A knob is (a config that names it, its dotted path, the value slot): the property tests set a hostile number
there and expect a ConfigError naming exactly that path, so a knob added tomorrow is covered without a
test change.
"""
from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from kbench.chunking.registry import CHUNKERS
from kbench.config import Experiment, load_experiment
from kbench.errors import ConfigError
from kbench.registry import StrategySection
from kbench.retrieval.registry import FUSIONS, LEGS, RERANKERS

BASE = {"dataset": {"name": "demo"}}
LEG_SETS = [["vector"], ["vector", "bm25"], ["vector", "postgres_fts"], ["bm25", "postgres_fts"]]


@dataclass(frozen=True)
class Knob:
    base: dict  # sections that select the strategy owning the knob
    path: str  # dotted path of the knob
    kind: type  # int or float
    slot: str = "value"  # value | dict (rrf weights: under one key) | list (evaluation.k: one item)

    def config(self, value: Any) -> dict:
        data = _deep_copy({**BASE, **self.base})  # never the shared BASE
        node = data
        parts = self.path.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = {"dict": {"vector": value}, "list": [value]}.get(self.slot, value)
        return data

    @property
    def error_path(self) -> str:
        return self.path + {"dict": ".vector", "list": "[0]"}.get(self.slot, "")

    def __repr__(self) -> str:  # hypothesis prints the knob of a failing example
        return f"Knob({self.path} with {self.base})"


def _deep_copy(data):
    return {k: _deep_copy(v) if isinstance(v, dict) else v for k, v in data.items()}


def _members(annotation) -> list:
    if get_origin(annotation) in (Union, types.UnionType):
        return [m for a in get_args(annotation) for m in _members(a)]
    return [annotation]


def _number_kind(annotation) -> tuple[type | None, str]:
    for member in _members(annotation):
        if member in (int, float):
            return member, "value"
        if get_origin(member) is dict and get_args(member)[1] in (int, float):
            return get_args(member)[1], "dict"
        if get_origin(member) is list and get_args(member)[0] in (int, float):
            return get_args(member)[0], "list"
    return None, "value"


def _model_knobs(model: type[BaseModel], prefix: str, base: dict) -> list[Knob]:
    knobs = []
    for name, field in model.model_fields.items():
        kind, slot = _number_kind(field.annotation)
        if kind is not None:
            knobs.append(Knob(base, f"{prefix}{name}", kind, slot))
        for member in _members(field.annotation):
            if isinstance(member, type) and issubclass(member, BaseModel) and not issubclass(member, StrategySection):
                knobs += _model_knobs(member, f"{prefix}{name}.", base)
    return knobs


def _validates(data: dict) -> bool:
    try:
        load_experiment(data)
    except (ConfigError, ValidationError):
        return False
    return True


def number_knobs() -> list[Knob]:
    knobs = _model_knobs(Experiment, "", {})
    for name in CHUNKERS.names():
        knobs += _model_knobs(CHUNKERS.get(name).params, "chunking.", {"chunking": {"strategy": name}})
    for name in LEGS.names():
        base = {"retrieval": {"legs": [name]}} if _validates({**BASE, "retrieval": {"legs": [name]}}) else None
        if base is not None:
            knobs += _model_knobs(LEGS.get(name).params, f"retrieval.leg_params.{name}.", base)
    for name in FUSIONS.names():
        for legs in LEG_SETS:
            base = {"retrieval": {"legs": legs, "fusion": {"strategy": name}}}
            if _validates({**BASE, **base}):
                knobs += _model_knobs(FUSIONS.get(name).params, "retrieval.fusion.", base)
                break
    for name in RERANKERS.names():
        base = {"rerank": {"enabled": True, "strategy": name}}
        if _validates({**BASE, **base}):
            knobs += _model_knobs(RERANKERS.get(name).params, "rerank.", base)
    return knobs


KNOBS = number_knobs()
