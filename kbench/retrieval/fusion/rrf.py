"""``rrf``: Reciprocal Rank Fusion (Cormack et al. 2009) over any number of legs.

score(chunk) = sum over the legs that returned it of ``weight_leg / (k + rank_leg)``, rank 1-based in the
leg's list; a leg that did not return the chunk adds nothing. k = 60 as in the paper. Ties (common: rank 3
in one leg only vs rank 3 in another only) are broken by the chunk's best rank in any leg, then by the
order of ``retrieval.legs``, so the result is deterministic.
"""
from __future__ import annotations

from pydantic import Field

from kbench.records import Hit
from kbench.retrieval.contracts import FusionParams, LegResult
from kbench.retrieval.fusion.common import evidence, leg_names_match_type, ranked_hits
from kbench.retrieval.registry import FUSIONS


class RRFParams(FusionParams):
    k: float = Field(60, ge=0, description="rank offset: score = weight / (k + rank)")
    weights: dict[str, float] | None = Field(None, description="leg name -> weight (default 1 each)")

    def check_legs(self, legs: list[str]) -> None:
        unknown = sorted(set(self.weights or {}) - set(legs))
        if unknown:
            raise ValueError(f"retrieval.fusion.weights: {unknown} are not in retrieval.legs {legs}")


@FUSIONS.register("rrf", RRFParams)
def rrf_fuse(leg_results: dict[str, LegResult], params: RRFParams, top_k: int) -> list[Hit]:
    """Reciprocal Rank Fusion: sum of weight / (k + rank) over the legs that found a chunk."""
    legs = list(leg_results)
    weights = params.weights or {}
    scores, ranks = evidence(leg_results)
    fused = {c: sum(weights.get(leg, 1.0) / (params.k + r) for leg, r in chunk_ranks.items())
             for c, chunk_ranks in ranks.items()}
    # candidates in tie-break order: best rank first, then leg order
    candidates = sorted(ranks, key=lambda c: min((r, legs.index(leg)) for leg, r in ranks[c].items()))
    match_types = {c: leg_names_match_type([leg for leg in legs if leg in ranks[c]], legs) for c in candidates}
    return ranked_hits(candidates, fused, scores, ranks, match_types, top_k)
