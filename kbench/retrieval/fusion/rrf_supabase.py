"""``rrf_supabase``: Supabase's ``hybrid_knowledge_chunks_search_v2``, reproduced as written.

The SQL calls itself Reciprocal Rank Fusion but never computes a rank:
- ``text_results``: every chunk matching the tsquery, ``rank_text = ts_rank(tsv, query)`` (a score; no LIMIT);
- ``vector_results``: every chunk, ``rank_vec = -(embedding <#> q)``; pgvector's ``<#>`` is the *negative*
  inner product, so rank_vec is the inner product (cosine for unit vectors), again a score;
- an inner ``JOIN`` of both: only chunks the text leg matched survive, whatever their similarity;
- ``score = 1.0 / (rrf_k + rank_text) + 1.0 / (rrf_k + rank_vec)``, rrf_k = 10, ``ORDER BY score DESC
  LIMIT match_count``.
Because the "ranks" are scores, a *better* match (higher ts_rank, higher cosine) gets a *smaller* score:
the ordering is inverted relative to relevance. ``rrf`` is the fixed version to measure against.

To reproduce the unlimited legs, a run needs ``retrieval.candidates_per_leg`` at least the corpus size
(configs/retrieval/rrf_supabase.yaml sets it); with a smaller depth, matching chunks beyond the vector
leg's depth drop out of the JOIN. Ties (equal score sums) keep the vector leg's order.
"""
from __future__ import annotations

from pydantic import Field

from kbench.records import Hit
from kbench.retrieval.contracts import LegResult
from kbench.retrieval.fusion.common import TwoLegParams, evidence, ranked_hits, two_legs
from kbench.retrieval.registry import FUSIONS


class RRFSupabaseParams(TwoLegParams):
    method = "rrf_supabase"
    rrf_k: float = Field(10, description="added to each leg's score (not rank) before the reciprocal")


@FUSIONS.register("rrf_supabase", RRFSupabaseParams)
def rrf_supabase_fuse(leg_results: dict[str, LegResult], params: RRFSupabaseParams, top_k: int) -> list[Hit]:
    """Supabase as written: 1/(rrf_k + ts_rank) + 1/(rrf_k + inner product), chunks in both legs only."""
    (vec_name, vec), (text_name, text) = two_legs(leg_results, "rrf_supabase")
    scores, ranks = evidence({vec_name: vec, text_name: text})
    rank_text = dict(text)
    candidates = [c for c, _ in vec if c in rank_text]  # JOIN: both legs
    fused = {c: 1.0 / (params.rrf_k + rank_text[c]) + 1.0 / (params.rrf_k + scores[c][vec_name])
             for c in candidates}
    return ranked_hits(candidates, fused, scores, ranks, {c: "hybrid" for c in candidates}, top_k)
