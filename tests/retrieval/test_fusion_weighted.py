"""weighted: convex combination of normalized scores, with the floor for a chunk one leg missed."""
from __future__ import annotations

import pytest

from kbench.config import ConfigError, load_experiment
from kbench.retrieval.fusion.weighted import WeightedParams, weighted_fuse
from tests.retrieval.leg_outputs import demo_legs

VEC = [(1, 0.9), (2, 0.5), (3, 0.1)]
BM25 = [(3, 12.0), (4, 8.0), (5, 2.0)]


def fuse(a, b, top_k=10, **params):
    return weighted_fuse({"vector": a, "bm25": b}, WeightedParams(**params), top_k)


def scores(hits):
    return {h.chunk_index: h.score for h in hits}


def test_min_max_convex_combination():
    got = scores(fuse(VEC, BM25, weight=0.3))
    # vector: 1 -> 1, 2 -> .5, 3 -> 0; bm25: 3 -> 1, 4 -> .6, 5 -> 0; missing -> 0 (the min-max minimum)
    assert got == pytest.approx({1: 0.3, 2: 0.15, 3: 0.7, 4: 0.42, 5: 0.0})


def test_missing_min_vs_zero_differ_for_z_score():
    z_min = scores(fuse(VEC, BM25, normalization="z-score", missing="min"))
    z_zero = scores(fuse(VEC, BM25, normalization="z-score", missing="zero"))
    # chunk 1 is missing from bm25: the floor is bm25's lowest z (negative) vs 0
    assert z_min[1] < z_zero[1]
    assert z_min[3] == pytest.approx(z_zero[3])  # found by both legs: no floor involved


def test_rank_floor_is_one_over_n():
    got = scores(fuse(VEC, BM25, normalization="rank", weight=0.5))
    assert got[1] == pytest.approx(0.5 * 1.0 + 0.5 * (1 / 3))


def test_weight_extremes_reproduce_one_leg_order():
    legs = {"vector": VEC, "bm25": BM25}
    only_vector = [h.chunk_index for h in weighted_fuse(legs, WeightedParams(weight=1.0), 3)]
    assert only_vector == [1, 2, 3]
    only_bm25 = [h.chunk_index for h in weighted_fuse(legs, WeightedParams(weight=0.0), 3)]
    assert only_bm25[0] == 3 and only_bm25[1] == 4


def test_empty_leg_leaves_the_other_legs_order():
    hits = fuse(VEC, [], normalization="z-score")
    assert [h.chunk_index for h in hits] == [1, 2, 3]
    assert all(h.match_type == "vector" for h in hits)


def test_match_types_name_the_legs():
    types = {h.chunk_index: h.match_type for h in fuse(VEC, BM25)}
    assert types == {1: "vector", 2: "vector", 3: "hybrid", 4: "bm25", 5: "bm25"}


def test_real_legs_scores_are_convex_and_ordered(shared_cache_workspace):
    legs = demo_legs(str(shared_cache_workspace))
    for normalization in ("min-max", "dbsf", "rank"):
        for vec, bm25 in zip(legs.vector[:20], legs.bm25[:20]):
            hits = fuse(vec, bm25, top_k=1000, weight=0.7, normalization=normalization)
            assert len(hits) == len({c for c, _ in vec} | {c for c, _ in bm25})
            assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
            if normalization != "dbsf":
                assert all(-1e-12 <= h.score <= 1 + 1e-12 for h in hits)


def test_config_rejects_weight_out_of_range_and_unknown_normalization(tmp_path):
    base = {"dataset": {"name": "demo"}, "workspace": str(tmp_path)}
    with pytest.raises(ConfigError, match="weight"):
        load_experiment({**base, "retrieval": {"legs": ["vector", "vector"],
                                               "fusion": {"strategy": "weighted", "weight": 1.5}}})
    with pytest.raises(ConfigError, match="normalization"):
        load_experiment({**base, "retrieval": {"legs": ["vector", "vector"],
                                               "fusion": {"strategy": "weighted", "normalization": "softmax"}}})


def test_per_leg_normalization_against_a_hand_computation():
    """{vector: none, bm25: min-max}: raw cosine + min-max BM25 over the leg's list, 0.7 / 0.3."""
    got = scores(fuse(VEC, BM25, weight=0.7, normalization={"vector": "none", "bm25": "min-max"}))
    # vector raw: 1 -> .9, 2 -> .5, 3 -> .1, floor .1; bm25 (12, 8, 2) -> (1, .6, 0), floor 0
    hand = {1: 0.7 * 0.9 + 0.3 * 0.0, 2: 0.7 * 0.5 + 0.3 * 0.0, 3: 0.7 * 0.1 + 0.3 * 1.0,
            4: 0.7 * 0.1 + 0.3 * 0.6, 5: 0.7 * 0.1 + 0.3 * 0.0}
    assert got == pytest.approx(hand)
    same = fuse(VEC, BM25, weight=0.7, normalization={"vector": "min-max", "bm25": "min-max"})
    assert scores(same) == pytest.approx(scores(fuse(VEC, BM25, weight=0.7)))  # one name = that name per leg


def test_per_leg_normalization_must_name_every_leg(workspace):
    from tests.conftest import make_config

    config = make_config(workspace, retrieval={"legs": ["vector", "bm25"], "fusion": {
        "strategy": "weighted", "normalization": {"vector": "none", "bm52": "min-max"}}})
    with pytest.raises(ConfigError, match=r"retrieval.fusion.normalization: name one normalization per leg"):
        load_experiment(config)
