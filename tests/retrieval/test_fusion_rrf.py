"""rrf: Reciprocal Rank Fusion over any number of legs, optional weights, deterministic ties."""
from __future__ import annotations

import pytest

from kbench.config import ConfigError, load_experiment
from kbench.retrieval.fusion.rrf import RRFParams, rrf_fuse
from tests.retrieval.leg_outputs import demo_legs


def test_sum_of_reciprocal_ranks_over_the_legs_that_found_a_chunk():
    legs = {"vector": [(1, 0.9), (2, 0.8), (3, 0.7)], "bm25": [(3, 9.0), (4, 1.0)]}
    hits = rrf_fuse(legs, RRFParams(), 10)
    assert {h.chunk_index: h.score for h in hits} == pytest.approx(
        {3: 1 / 63 + 1 / 61, 1: 1 / 61, 2: 1 / 62, 4: 1 / 62})
    # 2 (vector rank 2) and 4 (bm25 rank 2) tie: the earlier leg in retrieval.legs wins
    assert [h.chunk_index for h in hits] == [3, 1, 2, 4]
    assert hits[0].leg_ranks == {"vector": 3, "bm25": 1} and hits[0].match_type == "hybrid"


def test_three_legs_weights_and_k():
    legs = {"a": [(1, 0.0), (2, 0.0)], "b": [(2, 0.0)], "c": [(1, 0.0)]}
    hits = rrf_fuse(legs, RRFParams(k=0, weights={"b": 3.0}), 10)
    assert {h.chunk_index: h.score for h in hits} == pytest.approx({1: 1 + 1, 2: 1 / 2 + 3})
    assert {h.chunk_index: h.match_type for h in hits} == {1: "a+c", 2: "a+b"}


def test_weights_must_name_legs(tmp_path):
    with pytest.raises(ConfigError, match="not in retrieval.legs"):
        load_experiment({"dataset": {"name": "demo"}, "workspace": str(tmp_path),
                         "retrieval": {"legs": ["vector"], "fusion": {"strategy": "rrf", "weights": {"bm25": 2}}}})


def test_real_legs_rrf_ranks_agreeing_chunks_first(shared_cache_workspace):
    legs = demo_legs(str(shared_cache_workspace))
    for vec, bm25 in zip(legs.vector, legs.bm25):
        hits = rrf_fuse({"vector": vec, "bm25": bm25}, RRFParams(), 20)
        v, b = {c: r for r, (c, _) in enumerate(vec, 1)}, {c: r for r, (c, _) in enumerate(bm25, 1)}
        for h in hits:
            assert h.score == pytest.approx(sum(1 / (60 + r[h.chunk_index]) for r in (v, b) if h.chunk_index in r))
        both = [h for h in hits if h.match_type == "hybrid"]
        top_both = min(((v[c] + b[c], c) for c in set(v) & set(b)), default=None)
        if top_both is not None and top_both[0] <= 2:  # rank 1 in both legs: nothing can beat it
            assert hits[0].chunk_index == top_both[1] and both
