"""rrf_supabase: Supabase's SQL as written (scores in place of ranks, JOIN keeps chunks in both legs)."""
from __future__ import annotations

import pytest

from kbench.retrieval.fusion.rrf import RRFParams, rrf_fuse
from kbench.retrieval.fusion.rrf_supabase import RRFSupabaseParams, rrf_supabase_fuse
from tests.retrieval.leg_outputs import demo_legs


def test_formula_join_and_inverted_order():
    vec = [(1, 0.9), (2, 0.5), (3, 0.1)]  # inner product
    text = [(2, 0.6), (3, 0.2), (9, 0.1)]  # ts_rank; 9 is not in the vector leg's list
    hits = rrf_supabase_fuse({"vector": vec, "postgres_fts": text}, RRFSupabaseParams(), 10)
    assert {h.chunk_index: h.score for h in hits} == pytest.approx(
        {2: 1 / 10.6 + 1 / 10.5, 3: 1 / 10.2 + 1 / 10.1})
    # the worse match (3: lower ts_rank, lower similarity) ranks first: the quirk
    assert [h.chunk_index for h in hits] == [3, 2]
    assert all(h.match_type == "hybrid" for h in hits)


def test_on_real_legs_it_inverts_what_fixed_rrf_ranks_first(shared_cache_workspace):
    legs = demo_legs(str(shared_cache_workspace), 60)
    inverted = compared = 0
    for vec, text in zip(legs.vector, legs.bm25):
        quirk = rrf_supabase_fuse({"vector": vec, "postgres_fts": text}, RRFSupabaseParams(), 100)
        assert {h.chunk_index for h in quirk} == {c for c, _ in vec} & {c for c, _ in text}
        if len(quirk) >= 3:
            fixed = rrf_fuse({"vector": vec, "postgres_fts": [(c, s) for c, s in text if c in dict(vec)]},
                             RRFParams(k=10), 100)
            compared += 1
            inverted += quirk[-1].chunk_index == fixed[0].chunk_index or quirk[0].chunk_index == fixed[-1].chunk_index
    assert compared >= 10
    assert inverted / compared > 0.5  # mostly: the fixed version's best is the quirk's worst (or vice versa)
