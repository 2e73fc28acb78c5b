"""Legs, fusions and rerankers fulfil declared contracts: registration refuses one that does not, and a
strategy that declares no hook of its own gets the contract's default."""
from __future__ import annotations

import pytest

from kbench.config import RerankConfig, RetrievalConfig
from kbench.embedding.models import ModelNotInstalledError
from kbench.records import Hit
from kbench.registry import StrictModel
from kbench.retrieval.contracts import (ContractError, FusionParams, Leg, RerankParams, Reranker, SearchContext,
                                        require_fusion, require_leg, require_reranker)
from kbench.retrieval.registry import FUSIONS, LEGS, RERANKERS, ContractRegistry
from kbench.retrieval.rerank import check_reranker
from kbench.retrieval.stage import leg_depth, legs_need_query_vectors


class EveryChunk(Leg):
    needs_query_vectors = False

    def __init__(self, context, params):
        self.n = len(context.chunks)

    def search(self, queries, query_vectors, k, mask=None):
        return [[(i, 1.0) for i in range(min(k, self.n))] for _ in queries]


class Reverse(Reranker):
    def __init__(self, context, params):
        pass

    def rerank(self, query_text, hits, top_k):
        return list(reversed(hits))[:top_k]


def first_leg(leg_results, params, top_k):
    (name, ranked), *_ = leg_results.items()
    return [Hit(c, s, match_type=name) for c, s in ranked[:top_k]]


def test_every_registered_strategy_fulfils_its_contract():
    for name in LEGS.names():
        require_leg(LEGS.field, name, LEGS.get(name).impl, LEGS.get(name).params)
        assert isinstance(LEGS.get(name).impl.needs_query_vectors, bool)
    for name in FUSIONS.names():
        assert issubclass(FUSIONS.get(name).params, FusionParams)
    for name in RERANKERS.names():
        assert issubclass(RERANKERS.get(name).impl, Reranker)
        assert issubclass(RERANKERS.get(name).params, RerankParams)


def test_a_leg_that_does_not_declare_needs_query_vectors_is_refused():
    legs = ContractRegistry(LEGS.field, require_leg)

    class Undeclared(Leg):
        def __init__(self, context, params):
            pass

        def search(self, queries, query_vectors, k, mask=None):
            return [[] for _ in queries]

    with pytest.raises(ContractError, match="'undeclared' must declare needs_query_vectors"):
        legs.register("undeclared")(Undeclared)
    assert legs.names() == []


def test_a_duck_typed_leg_or_one_without_search_is_refused():
    legs = ContractRegistry(LEGS.field, require_leg)

    class DuckTyped:  # what every leg looked like before the contract: right attributes, no base class
        needs_query_vectors = False

        def search(self, queries, query_vectors, k, mask=None):
            return []

    with pytest.raises(ContractError, match="must subclass kbench.retrieval.contracts.Leg"):
        legs.register("duck")(DuckTyped)

    class NoSearch(Leg):
        needs_query_vectors = True

        def __init__(self, context, params):
            pass

    with pytest.raises(ContractError, match="does not implement search"):
        legs.register("no_search")(NoSearch)
    legs.register("every_chunk")(EveryChunk)
    assert legs.names() == ["every_chunk"]


def test_a_fusion_whose_params_are_not_fusion_params_is_refused_and_base_params_get_the_defaults():
    fusions = ContractRegistry(FUSIONS.field, require_fusion)

    class PlainParams(StrictModel):
        weight: float = 0.5

    with pytest.raises(ContractError, match="must subclass kbench.retrieval.contracts.FusionParams"):
        fusions.register("plain", PlainParams)(first_leg)
    with pytest.raises(ContractError, match="must subclass"):  # no params at all: a bare StrictModel
        fusions.register("bare")(first_leg)

    fusions.register("first_leg", FusionParams)(first_leg)
    params = fusions.params("first_leg", {})
    assert params.check_legs(["vector", "bm25", "postgres_fts"]) is None  # any legs fuse
    assert params.leg_depth(7) == 7
    config = RetrievalConfig(legs=["vector", "bm25"], fusion={"strategy": "rrf"}, top_k=10, candidates_per_leg=30)
    assert leg_depth(config, params, keep=10) == 30  # the default asks nothing beyond candidates_per_leg
    assert leg_depth(config, params, keep=50) == 50  # ... or a reranker's depth


def test_fusion_params_that_declare_hooks_are_used_without_lookup():
    config = RetrievalConfig(legs=["vector", "postgres_fts"], fusion={"strategy": "archon_weighted"}, top_k=10)
    assert leg_depth(config, config.fusion.params, keep=10) == 20  # Archon's SQL reads 2 x match_count per leg
    with pytest.raises(ValueError, match="'archon_hybrid' fuses exactly two legs"):
        RetrievalConfig(legs=["vector"], fusion={"strategy": "archon_hybrid"})


def test_a_reranker_needs_the_base_class_and_rerank_params_and_gets_default_preflight_and_multiplier():
    rerankers = ContractRegistry(RERANKERS.field, require_reranker)

    class Params(StrictModel):
        model: str = "m"

    with pytest.raises(ContractError, match="must subclass kbench.retrieval.contracts.RerankParams"):
        rerankers.register("plain_params", Params)(Reverse)

    class DuckTyped:
        def rerank(self, query_text, hits, top_k):
            return hits

    with pytest.raises(ContractError, match="must subclass kbench.retrieval.contracts.Reranker"):
        rerankers.register("duck", RerankParams)(DuckTyped)

    rerankers.register("reverse", RerankParams)(Reverse)
    entry = rerankers.get("reverse")
    params = entry.params()
    assert params.candidate_multiplier == 1
    assert entry.impl.preflight(params) is None  # nothing to check
    hits = [Hit(i, 1.0 - i / 10) for i in range(4)]
    reranked = entry.impl(SearchContext(chunks=[]), params).rerank("q", hits, 3)
    assert [h.chunk_index for h in reranked] == [3, 2, 1]


def test_the_search_stage_reads_the_declared_attributes():
    assert legs_need_query_vectors(RetrievalConfig(legs=["vector"]))
    assert legs_need_query_vectors(RetrievalConfig(legs=["pg_hybrid"]))
    assert not legs_need_query_vectors(RetrievalConfig(legs=["bm25", "postgres_fts"], fusion={"strategy": "rrf"}))


def test_a_reranker_that_cannot_run_fails_its_preflight(monkeypatch, tmp_path):
    monkeypatch.setenv("KBENCH_MODELS_DIR", str(tmp_path))
    with pytest.raises(ModelNotInstalledError, match="'no-such-reranker' is not a folder"):
        check_reranker(RerankConfig(enabled=True, strategy="cross_encoder", model="no-such-reranker"))
    check_reranker(RerankConfig(enabled=False, strategy="cross_encoder", model="no-such-reranker"))  # off: no check
