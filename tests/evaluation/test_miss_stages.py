"""Every miss_stage produced by a constructed case, and the shares adding up."""
from __future__ import annotations

import math

from kbench.evaluation.config import OverlapRule
from kbench.evaluation.miss_stages import MISS_STAGES, doc_miss_stages, miss_shares, span_miss_stages
from kbench.records import Chunk, Span


def c(doc: str, n: int = 0, start: int = 0, end: int = 10) -> Chunk:
    return Chunk(doc, n, start, end, "x")


def test_document_items_hit_not_retrieved_and_lost_in_fusion():
    final = [c("a"), c("b"), c("x")]
    stages = {"leg_vector": [c("a"), c("b")], "leg_bm25": [c("f"), c("a")], "fusion": final}
    assert doc_miss_stages(["a", "f", "z"], final, stages, k=2) == ["hit", "lost_in_fusion", "not_retrieved"]


def test_a_document_a_leg_had_only_below_the_window_was_not_retrieved_without_a_reranker():
    final = [c("a"), c("b")]
    stages = {"leg_vector": [c("a"), c("b"), c("deep")], "fusion": final}
    assert doc_miss_stages(["deep"], final, stages, k=2) == ["not_retrieved"]


def test_lost_in_rerank_the_reranker_saw_it_and_dropped_it():
    fused = [c("a"), c("b"), c("r"), c("s")]
    reranked = [c("b"), c("a")]
    stages = {"leg_vector": fused, "fusion": fused, "rerank": reranked}
    # the leg's window is what the reranker reads (4 candidates), so "s" at leg rank 4 reached the reranker
    assert doc_miss_stages(["r", "s", "b"], reranked, stages, k=2) == ["lost_in_rerank", "lost_in_rerank", "hit"]


def test_lost_in_grouping_the_top_k_before_grouping_had_it():
    fused = [c("a", 0), c("g"), c("a", 1)]
    grouped = [c("a", 0), c("b")]  # page grouping reordered documents and pushed "g" out of the top 2
    stages = {"leg_vector": fused, "fusion": fused}
    assert doc_miss_stages(["g"], grouped, stages, k=2) == ["lost_in_grouping"]


RULE = OverlapRule(rule="min_fraction", value=0.8)
HALVES = {"d": [c("d", 0, 0, 10), c("d", 1, 10, 20)], "e": [c("e", 0, 0, 20)]}


def test_span_items_every_chunking_stage():
    split = Span("d", 5, 15)  # no 10-character chunk holds 8 of its 10 characters; both together do
    both = [c("d", 0, 0, 10), c("d", 1, 10, 20)]
    stages = {"leg_vector": both, "fusion": both}
    assert span_miss_stages([split], both, stages, 2, RULE, HALVES) == ["split_across_chunks"]
    one = [c("d", 0, 0, 10), c("x")]
    assert span_miss_stages([split], one, {"leg_vector": one, "fusion": one}, 2, RULE, HALVES) == ["cut_by_chunking"]


def test_span_items_hit_wrong_chunk_not_retrieved_lost_in_fusion():
    doc_chunks = {"d": [c("d", 0, 0, 10), c("d", 1, 10, 20)], "e": [c("e", 0, 0, 20)]}
    in_first, in_second, in_e = Span("d", 1, 9), Span("d", 11, 19), Span("e", 2, 18)
    final = [c("d", 0, 0, 10), c("x")]
    stages = {"leg_vector": final, "leg_bm25": [c("e", 0, 0, 20)], "fusion": final}
    got = span_miss_stages([in_first, in_second, in_e, Span("y", 0, 5)], final, stages, 2, RULE,
                           {**doc_chunks, "y": [c("y", 0, 0, 10)]})
    assert got == ["hit", "right_doc_wrong_chunk", "lost_in_fusion", "not_retrieved"]


def test_every_stage_is_produced_somewhere_and_shares_add_up():
    produced = {"hit", "not_retrieved", "lost_in_fusion", "lost_in_rerank", "lost_in_grouping",
                "right_doc_wrong_chunk", "split_across_chunks", "cut_by_chunking"}
    assert produced == set(MISS_STAGES)  # each has its constructed case above
    shares = miss_shares([["hit", "lost_in_fusion"], ["hit"], ["cut_by_chunking", "hit"], math.nan])
    assert shares["miss_share_hit"] == 3 / 5 and shares["miss_share_lost_in_fusion"] == 1 / 5
    assert math.isclose(sum(shares.values()), 1.0)
    assert set(shares) == {f"miss_share_{s}" for s in MISS_STAGES}
