"""Retrieval registries: legs (first-stage rankers), fusions and rerankers, by config name.

Each refuses, when a module registers into it, a strategy that does not fulfil its contract
(kbench/retrieval/contracts.py), so the search stage calls declared attributes and never guesses.
"""
from __future__ import annotations

from typing import Callable, TypeVar

from kbench.registry import Registry, StrictModel
from kbench.retrieval.contracts import (Fusion, Leg, LegResult, Reranker, SearchContext, require_fusion,
                                        require_leg, require_reranker)

# LegResult and SearchContext are defined in contracts and re-exported here, where code that builds a
# context and its legs (tests, benchmarks, notebooks) already imports the registries from
__all__ = ["FUSIONS", "LEGS", "RERANKERS", "ContractRegistry", "LegResult", "SearchContext"]

T = TypeVar("T")


class ContractRegistry(Registry[T]):
    """A registry whose ``require(field, name, impl, params)`` must pass before an entry is added."""

    def __init__(self, field: str, require: Callable[[str, str, T, type[StrictModel]], None]):
        super().__init__(field)
        self.require = require

    def register(self, name: str, params: type[StrictModel] | None = None) -> Callable[[T], T]:
        add = super().register(name, params)

        def decorator(impl: T) -> T:
            self.require(self.field, name, impl, params or StrictModel)
            return add(impl)

        return decorator


LEGS: ContractRegistry[type[Leg]] = ContractRegistry("retrieval.legs", require_leg)
FUSIONS: ContractRegistry[Fusion] = ContractRegistry("retrieval.fusion.strategy", require_fusion)
RERANKERS: ContractRegistry[type[Reranker]] = ContractRegistry("rerank.strategy", require_reranker)
