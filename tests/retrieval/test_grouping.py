"""Page grouping (Archon's _group_by_page, page = document)."""
from __future__ import annotations

import pytest

from kbench.records import Chunk, Hit
from kbench.retrieval.grouping import group_by_page

CHUNKS = [Chunk("p1", 0, 0, 1, ""), Chunk("p1", 1, 1, 2, ""), Chunk("p2", 0, 0, 1, ""), Chunk("p3", 0, 0, 1, ""),
          Chunk("p1", 2, 2, 3, "")]


def test_sum_with_boost_for_pages_with_several_chunks():
    hits = [Hit(2, 0.9), Hit(0, 0.5), Hit(3, 0.45), Hit(1, 0.4), Hit(4, 0.1)]
    pages = group_by_page(hits, CHUNKS)
    # p1: (0.5 + 0.4 + 0.1) * (1 + 0.1 * 3) = 1.3; p2: 0.9 (one chunk: no boost); p3: 0.45
    assert [(CHUNKS[h.chunk_index].doc_id, h.score) for h in pages] == [
        ("p1", pytest.approx(1.3)), ("p2", 0.9), ("p3", 0.45)]
    assert pages[0].chunk_index == 0  # the page's best-ranked chunk represents it


def test_two_chunks_boost_and_stable_ties():
    hits = [Hit(3, 0.6), Hit(0, 0.25), Hit(1, 0.25)]
    pages = group_by_page(hits, CHUNKS, boost_per_chunk=0.1)
    # p1: 0.5 * 1.2 = 0.6 ties p3's 0.6: p3 appeared first and stays first (stable sort, as production's sorted)
    assert [CHUNKS[h.chunk_index].doc_id for h in pages] == ["p3", "p1"]
    assert pages[1].score == pytest.approx(0.6)


def test_vector_similarity_mode_sums_the_vector_legs_cosine():
    hits = [Hit(0, 0.9, leg_scores={"vector": 0.4, "postgres_fts": 0.2}, match_type="hybrid"),
            Hit(1, 0.8, leg_scores={"postgres_fts": 0.7}, match_type="keyword"),
            Hit(2, 0.3, leg_scores={"vector": 0.3}, match_type="vector")]
    pages = group_by_page(hits, CHUNKS, score="vector_similarity")
    # p1: (0.4 + 0) * 1.2 = 0.48 (the keyword-only chunk adds 0, as production's similarity_score does)
    assert [(CHUNKS[h.chunk_index].doc_id, h.score) for h in pages] == [("p1", pytest.approx(0.48)), ("p2", 0.3)]
    assert pages[0].match_type == "hybrid"
