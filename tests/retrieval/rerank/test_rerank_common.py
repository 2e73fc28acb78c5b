"""apply_scores: the reranked order, its evidence, and the untouched tail."""
from __future__ import annotations

import pytest

from kbench.records import Hit
from kbench.retrieval.rerank.common import apply_scores, split_candidates


def first_stage() -> list[Hit]:
    return [Hit(10 + i, 1.0 - 0.1 * i, leg_scores={"vector": 1.0 - 0.1 * i}, leg_ranks={"vector": i + 1},
                match_type="vector") for i in range(5)]


def test_reorders_by_new_score_and_keeps_the_evidence():
    hits = first_stage()
    out = apply_scores(hits, [0.1, 0.9, 0.5, 0.9, -3.0], top_k=4)
    assert [h.chunk_index for h in out] == [11, 13, 12, 10]  # the tie 11/13 keeps first-stage order
    assert [h.score for h in out] == [0.9, 0.9, 0.5, 0.1]
    assert out[0].leg_ranks == {"vector": 2, "first_stage": 2}
    assert out[0].leg_scores == {"vector": pytest.approx(0.9), "first_stage": pytest.approx(0.9), "rerank": 0.9}
    assert all(h.match_type == "vector" for h in out)


def test_tail_beyond_max_candidates_keeps_order_below_rescored_hits():
    candidates, tail = split_candidates(first_stage(), max_candidates=2)
    out = apply_scores(candidates, [5.0, 7.0], top_k=10, tail=tail)
    assert [h.chunk_index for h in out] == [11, 10, 12, 13, 14]
    assert out[1].score > out[2].score > out[3].score > out[4].score
    assert "rerank" not in out[2].leg_scores and out[2].leg_ranks["first_stage"] == 3


def test_score_count_mismatch_is_an_error():
    with pytest.raises(ValueError, match="2 scores for 5 candidates"):
        apply_scores(first_stage(), [1.0, 2.0], top_k=3)
