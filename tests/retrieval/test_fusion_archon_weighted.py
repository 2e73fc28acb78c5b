"""archon_weighted (Archon's hybrid_search_archon_crawled_pages) on hand-checked inputs and real legs."""
from __future__ import annotations

import pytest

from kbench.retrieval.fusion.archon_weighted import ArchonWeightedParams, archon_weighted_fuse
from tests.retrieval.leg_outputs import demo_legs


def fuse(vec, text, top_k, **params):
    return archon_weighted_fuse({"vector": vec, "postgres_fts": text}, ArchonWeightedParams(**params), top_k)


def test_weighted_sum_with_missing_legs_as_zero():
    vec = [(1, 0.80), (2, 0.60), (3, 0.03)]
    text = [(2, 0.50), (4, 0.90)]
    hits = fuse(vec, text, 5)
    # 1: 0.56; 2: 0.42 + 0.15 = 0.57; 4: 0.27; 3 is under the 0.05 threshold
    assert [h.chunk_index for h in hits] == [2, 1, 4]
    assert [h.score for h in hits] == pytest.approx([0.57, 0.56, 0.27])
    assert [h.match_type for h in hits] == ["hybrid", "vector", "keyword"]
    assert hits[0].leg_scores == {"vector": 0.60, "postgres_fts": 0.50}


def test_each_leg_reads_two_times_match_count():
    vec = [(i, 0.9 - 0.1 * i) for i in range(6)]
    text = [(100 + i, 1.0) for i in range(6)]
    hits = fuse(vec, text, 2)  # legs cut to 4 rows each, then the best 2 of their union
    assert len(hits) == 2
    assert set(h.chunk_index for h in fuse(vec, text, 100)) == set(range(6)) | {100 + i for i in range(6)}
    assert ArchonWeightedParams().leg_depth(5) == 10


def test_real_legs_order_by_the_weighted_sum(shared_cache_workspace):
    legs = demo_legs(str(shared_cache_workspace))
    n = 10
    for vec, text in zip(legs.vector, legs.bm25):
        hits = fuse(vec, text, n)
        v = {c: s for c, s in vec[: 2 * n] if s > 0.05}
        t = dict(text[: 2 * n])
        union = set(v) | set(t)
        expected = sorted(union, key=lambda c: -(0.7 * v.get(c, 0) + 0.3 * t.get(c, 0)))[:n]
        assert [round(h.score, 12) for h in hits] == [round(0.7 * v.get(c, 0) + 0.3 * t.get(c, 0), 12)
                                                       for c in expected]
