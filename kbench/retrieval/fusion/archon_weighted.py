"""``archon_weighted``: Archon's ``hybrid_search_archon_crawled_pages``.

What the SQL does (N = match_count):
- ``vector_results``: chunks with ``1 - distance > similarity_threshold`` (default 0.05),
  ``ORDER BY similarity DESC LIMIT N * 2``.
- ``text_results``: chunks matching ``plainto_tsquery``, ``ORDER BY ts_rank_cd DESC LIMIT N * 2``.
- every chunk in either (``LEFT JOIN`` both onto the table ``WHERE v.id IS NOT NULL OR t.id IS NOT NULL``,
  i.e. a full outer join), ``ORDER BY COALESCE(similarity, 0) * 0.7 + COALESCE(rank, 0) * 0.3 DESC LIMIT N``.
  A chunk missing from a leg scores 0 for it. The function returns similarity_score and text_rank (here
  ``leg_scores``) and match_type; the ordering score is not returned (here it is ``Hit.score``).

Ties: unspecified in PostgreSQL; here equal scores keep vector order, then keyword-only rows in text order.
The function also declares a ``source_filter`` parameter its SQL never reads; kbench's filters
(retrieval.filters) apply to both legs.
"""
from __future__ import annotations

from pydantic import Field

from kbench.records import Hit
from kbench.retrieval.contracts import LegResult
from kbench.retrieval.fusion.archon_hybrid import ArchonParams, archon_leg_rows
from kbench.retrieval.fusion.common import evidence, ranked_hits
from kbench.retrieval.registry import FUSIONS


class ArchonWeightedParams(ArchonParams):
    method = "archon_weighted"
    vector_weight: float = Field(0.7, description="weight of the cosine similarity")
    text_weight: float = Field(0.3, description="weight of the text rank (ts_rank_cd)")
    leg_limit_factor: int = Field(2, ge=1, description="each leg's LIMIT is this x match_count (Archon: 2)")


@FUSIONS.register("archon_weighted", ArchonWeightedParams)
def archon_weighted_fuse(leg_results: dict[str, LegResult], params: ArchonWeightedParams, top_k: int) -> list[Hit]:
    """Archon: 0.7 * similarity + 0.3 * text rank over the union of each leg's top 2N (missing = 0)."""
    (vec_name, vec), (text_name, text) = archon_leg_rows(
        leg_results, params.similarity_threshold, params.leg_depth(top_k), "archon_weighted")
    scores, ranks = evidence({vec_name: vec, text_name: text})
    in_vec, in_text = dict(vec), dict(text)
    candidates = [c for c, _ in vec] + [c for c, _ in text if c not in in_vec]
    fused = {c: in_vec.get(c, 0.0) * params.vector_weight + in_text.get(c, 0.0) * params.text_weight
             for c in candidates}
    match_types = {c: "hybrid" if c in in_vec and c in in_text else "vector" if c in in_vec else "keyword"
                   for c in candidates}
    return ranked_hits(candidates, fused, scores, ranks, match_types, top_k)
