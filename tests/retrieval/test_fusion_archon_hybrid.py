"""archon_hybrid (the Archon replication guide's hybrid_search_documents) on hand-checked inputs and real leg outputs.
Parity with the SQL itself on PostgreSQL: test_fusion_pg_parity.py."""
from __future__ import annotations

import pytest

from kbench.config import ConfigError, load_experiment
from kbench.retrieval.fusion.archon_hybrid import ArchonHybridParams, archon_hybrid_fuse
from tests.retrieval.leg_outputs import demo_legs

VEC = [(10, 0.82), (11, 0.61), (12, 0.40), (13, 0.04)]  # cosine, best first
TEXT = [(12, 0.35), (20, 0.70), (21, 0.10)]  # ts_rank_cd, best first (leg order, not sorted here on purpose)


def fuse(vec, text, top_k, **params):
    return archon_hybrid_fuse({"vector": vec, "postgres_fts": text}, ArchonHybridParams(**params), top_k)


def test_full_outer_join_scores_by_coalesce_and_labels_match_type():
    hits = fuse(VEC, TEXT, 10)
    # 13 is cut by the 0.05 threshold; 12 keeps its cosine (0.40), not its text rank; 20 and 21 keep ts_rank_cd
    assert [(h.chunk_index, h.score, h.match_type) for h in hits] == [
        (10, 0.82, "vector"), (20, 0.70, "keyword"), (11, 0.61, "vector"), (12, 0.40, "hybrid"),
        (21, 0.10, "keyword")]
    hybrid = hits[3]
    assert hybrid.leg_scores == {"vector": 0.40, "postgres_fts": 0.35}
    assert hybrid.leg_ranks == {"vector": 3, "postgres_fts": 1}


def test_each_leg_is_cut_to_match_count_before_the_join():
    # N = 2: vector keeps 10, 11; text keeps 12, 20 (12 is then keyword-only: not in the vector top-2)
    hits = fuse(VEC, TEXT, 2)
    assert [(h.chunk_index, h.match_type) for h in hits] == [(10, "vector"), (20, "keyword")]
    hits = fuse(VEC, TEXT, 3)
    assert [(h.chunk_index, h.match_type) for h in hits] == [(10, "vector"), (20, "keyword"), (11, "vector")]


def test_threshold_is_strict_and_null_reproduces_002_without_one():
    assert 13 not in [h.chunk_index for h in fuse(VEC, TEXT, 10)]
    assert 13 in [h.chunk_index for h in fuse(VEC, TEXT, 10, similarity_threshold=None)]
    assert 12 not in [h.chunk_index for h in fuse(VEC, [], 10, similarity_threshold=0.40)]  # 0.40 > 0.40 is false


def test_ties_keep_vector_rows_first_then_text_order():
    hits = fuse([(1, 0.5), (2, 0.5)], [(3, 0.5), (4, 0.5)], 10)
    assert [h.chunk_index for h in hits] == [1, 2, 3, 4]


def test_empty_text_leg_is_the_vector_leg_thresholded():
    hits = fuse(VEC, [], 10)
    assert [h.chunk_index for h in hits] == [10, 11, 12]
    assert all(h.match_type == "vector" for h in hits)


def test_on_real_legs_every_hit_comes_from_a_leg_top_n_with_its_coalesced_score(shared_cache_workspace):
    legs = demo_legs(str(shared_cache_workspace))
    n = 10
    for vec, text in zip(legs.vector, legs.bm25):
        hits = fuse(vec, text, n)
        top_vec, top_text = dict(vec[:n]), dict(text[:n])
        assert len(hits) == min(n, len(set(top_vec) | set(top_text)))
        for h in hits:
            expected = top_vec.get(h.chunk_index, top_text.get(h.chunk_index))
            assert h.score == expected
            assert h.match_type == {(True, True): "hybrid", (True, False): "vector", (False, True): "keyword"}[
                (h.chunk_index in top_vec, h.chunk_index in top_text)]
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_config_needs_exactly_two_legs(tmp_path):
    with pytest.raises(ConfigError, match="exactly two legs"):
        load_experiment({"dataset": {"name": "demo"}, "workspace": str(tmp_path),
                         "retrieval": {"legs": ["vector"], "fusion": {"method": "archon_hybrid"}}})
