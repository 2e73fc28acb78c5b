"""What every reranker shares: which candidates to rescore and how the new order keeps its evidence."""
from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from pydantic import Field

from kbench.records import Hit
from kbench.registry import in_unit
from kbench.retrieval.contracts import RerankParams


class CandidateParams(RerankParams):
    """How many first-stage results a reranker sees."""

    candidate_multiplier: int = Field(
        5, ge=1, description="fetch top_k x this many first-stage results to rerank (the Archon replication guide "
        "fetches 5x)", json_schema_extra=in_unit("x top_k"))
    max_candidates: int | None = Field(
        None, ge=1,
        description="rescore at most this many of the best candidates; the rest keep first-stage order below them",
        json_schema_extra=in_unit("candidates"))


def split_candidates(hits: list[Hit], max_candidates: int | None) -> tuple[list[Hit], list[Hit]]:
    """(candidates to rescore, the tail that keeps its first-stage order)."""
    if max_candidates is None:
        return hits, []
    return hits[:max_candidates], hits[max_candidates:]


def apply_scores(hits: list[Hit], scores: Sequence[float], top_k: int, tail: list[Hit] = ()) -> list[Hit]:
    """Order ``hits`` by ``scores`` (ties keep first-stage order), then ``tail``; keep the first ``top_k``.

    Each hit keeps its legs' scores and ranks and gains ``first_stage`` (the fused score and rank it came
    in with) and ``rerank`` (its new score), so a notebook can show what the reranker moved.
    """
    if len(scores) != len(hits):
        raise ValueError(f"reranker returned {len(scores)} scores for {len(hits)} candidates")
    order = sorted(range(len(hits)), key=lambda i: -float(scores[i]))  # sorted() is stable
    out = [_rescored(hits[i], float(scores[i]), first_rank=i + 1) for i in order]
    floor = min((h.score for h in out), default=0.0)
    for rank, h in enumerate(tail, start=len(hits) + 1):
        # the tail was not rescored: place it strictly below every rescored hit, in its old order
        out.append(_rescored(h, floor - rank, first_rank=rank, rescored=False))
    return out[:top_k]


def _rescored(hit: Hit, score: float, first_rank: int, rescored: bool = True) -> Hit:
    leg_scores = {**hit.leg_scores, "first_stage": hit.score}
    leg_ranks = {**hit.leg_ranks, "first_stage": first_rank}
    if rescored:
        leg_scores["rerank"] = score
    return replace(hit, score=score, leg_scores=leg_scores, leg_ranks=leg_ranks)  # keeps match_type, passages
