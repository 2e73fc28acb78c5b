"""``archon_hybrid``: the Archon replication guide's ``hybrid_search_documents`` (Archon's production hybrid).

What the SQL does, step by step (N = match_count = the run's top_k, or the rerank depth when reranking):
- ``vector_results``: the N chunks nearest the query, ``ORDER BY embedding <=> q LIMIT N``;
  with ``similarity_threshold`` set, only chunks with ``1 - distance > threshold`` (Archon's filter,
  default 0.05; the Archon replication guide's SQL has none: set it to null to reproduce the Archon replication guide exactly).
- ``text_results``: chunks matching ``plainto_tsquery``, ``ORDER BY ts_rank_cd DESC LIMIT N``.
- ``FULL OUTER JOIN`` on id; score ``COALESCE(v.similarity, t.similarity)``: a chunk both legs found keeps
  its cosine similarity (the text rank adds nothing but the label), a keyword-only chunk scores its
  ``ts_rank_cd`` (a different scale, usually far below cosine); match_type hybrid / vector / keyword.
- ``ORDER BY similarity DESC LIMIT N``.

Ties: PostgreSQL leaves the order of equal scores unspecified (its top-N heap sort is not stable). Here
equal scores keep the join's natural order: vector rows in vector order, then keyword-only rows in text
order. The same holds for which of several equally ranked rows a leg's ``LIMIT N`` keeps: the first N of
the leg's own order.
"""
from __future__ import annotations

from pydantic import Field

from kbench.records import Hit
from kbench.retrieval.contracts import LegResult
from kbench.retrieval.fusion.common import TwoLegParams, evidence, ranked_hits, two_legs
from kbench.retrieval.registry import FUSIONS


class ArchonParams(TwoLegParams):
    """What both Archon SQL functions share: a thresholded vector leg and a text leg, each cut to
    ``leg_limit_factor`` x match_count rows."""

    similarity_threshold: float | None = Field(
        0.05, description="vector hits need cosine similarity > this (Archon); null: none (the Archon replication guide's SQL)")
    leg_limit_factor: int = Field(1, ge=1, description="each leg's LIMIT is this x match_count (the Archon replication guide: 1)")

    def leg_depth(self, match_count: int) -> int:
        return self.leg_limit_factor * match_count


class ArchonHybridParams(ArchonParams):
    method = "archon_hybrid"


def archon_leg_rows(leg_results: dict[str, LegResult], threshold: float | None, limit: int, method: str):
    """The two CTEs: the vector leg thresholded (cosine > threshold) and each leg cut to ``limit`` rows.

    The threshold keeps a prefix of the similarity-ordered list, so filtering before or after the LIMIT
    gives the same rows, as in the SQL (WHERE before LIMIT)."""
    (vec_name, vec), (text_name, text) = two_legs(leg_results, method)
    if threshold is not None:
        vec = [(c, s) for c, s in vec if s > threshold]
    return (vec_name, list(vec[:limit])), (text_name, list(text[:limit]))


@FUSIONS.register("archon_hybrid", ArchonHybridParams)
def archon_hybrid_fuse(leg_results: dict[str, LegResult], params: ArchonHybridParams, top_k: int) -> list[Hit]:
    """The Archon replication guide: FULL OUTER JOIN of vector top-N and text top-N, score COALESCE(similarity, text rank)."""
    (vec_name, vec), (text_name, text) = archon_leg_rows(
        leg_results, params.similarity_threshold, params.leg_depth(top_k), "archon_hybrid")
    scores, ranks = evidence({vec_name: vec, text_name: text})
    in_vec = dict(vec)
    in_text = dict(text)
    candidates = [c for c, _ in vec] + [c for c, _ in text if c not in in_vec]  # the join's row order
    fused = {c: in_vec[c] if c in in_vec else in_text[c] for c in candidates}  # COALESCE(v, t)
    match_types = {c: "hybrid" if c in in_vec and c in in_text else "vector" if c in in_vec else "keyword"
                   for c in candidates}
    return ranked_hits(candidates, fused, scores, ranks, match_types, top_k)
