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

    def __init__(self, field: str, require: Callable[[str, str, T, type[StrictModel]], None],
                 modules: dict[str, str] | None = None):
        super().__init__(field, modules)
        self.require = require

    def register(self, name: str, params: type[StrictModel] | None = None) -> Callable[[T], T]:
        add = super().register(name, params)

        def decorator(impl: T) -> T:
            self.require(self.field, name, impl, params or StrictModel)
            return add(impl)

        return decorator


# A new strategy: its module (legs/, fusion/, rerank/) and its line here (kbench/registry.py: imported on first use).
LEGS: ContractRegistry[type[Leg]] = ContractRegistry("retrieval.legs", require_leg, {
    "bm25": "kbench.retrieval.legs.bm25",
    "code_examples": "kbench.retrieval.legs.code_examples",
    "pg_hybrid": "kbench.retrieval.legs.pg_hybrid",
    "postgres_fts": "kbench.retrieval.legs.postgres_fts",
    "vector": "kbench.retrieval.legs.vector",
})
FUSIONS: ContractRegistry[Fusion] = ContractRegistry("retrieval.fusion.strategy", require_fusion, {
    "archon_hybrid": "kbench.retrieval.fusion.archon_hybrid",
    "archon_weighted": "kbench.retrieval.fusion.archon_weighted",
    "none": "kbench.retrieval.fusion.single",
    "rrf": "kbench.retrieval.fusion.rrf",
    "rrf_supabase": "kbench.retrieval.fusion.rrf_supabase",
    "weighted": "kbench.retrieval.fusion.weighted",
})
RERANKERS: ContractRegistry[type[Reranker]] = ContractRegistry("rerank.strategy", require_reranker, {
    "bi_encoder": "kbench.retrieval.rerank.bi_encoder",
    "cross_encoder": "kbench.retrieval.rerank.cross_encoder",
    "llm": "kbench.retrieval.rerank.llm",
})
