"""``weighted``: a convex combination of two legs' normalized scores.

score = weight * norm(first leg) + (1 - weight) * norm(second leg), over the union of both legs' lists.
Normalizations (kbench/retrieval/fusion/normalization): none, min-max, z-score, rank, dbsf, each computed
over the list the leg returned (its top ``candidates_per_leg``). One name applies to both legs; a mapping
names one per leg (``{vector: none, bm25: min-max}``: cosine is already on a fixed scale, BM25 is not).

A chunk missing from one leg gets that leg's *floor*: ``missing: min`` (default) the lowest normalized
score the leg returned for this query (0 for min-max, 1/n for rank, the most negative z for z-score),
i.e. "no better than the leg's last result"; ``missing: zero`` a flat 0 (ranx's wsum; equal to ``min`` for
min-max). A leg that returned nothing for the query adds the same constant to every chunk (0), so the
other leg alone decides the order. Ties keep the first leg's order, then the second leg's.
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from kbench.records import Hit
from kbench.retrieval.contracts import LegResult
from kbench.retrieval.fusion.common import TwoLegParams, evidence, leg_names_match_type, ranked_hits, two_legs
from kbench.retrieval.fusion.normalization import Normalization, normalize
from kbench.retrieval.registry import FUSIONS


class WeightedParams(TwoLegParams):
    method = "weighted"
    leg_order = "[leg weighted by weight, leg weighted by 1 - weight] (e.g. [vector, bm25])"
    weight: float = Field(0.5, ge=0, le=1, description="weight of the first leg in retrieval.legs; "
                                                        "the second gets 1 - weight")
    normalization: Normalization | dict[str, Normalization] = Field(
        "min-max", description="none | min-max | z-score | rank | dbsf, or one per leg: {vector: none, bm25: min-max}")
    missing: Literal["min", "zero"] = Field("min", description="score for a chunk a leg did not return: the "
                                                               "leg's lowest normalized score, or 0")


    def check_legs(self, legs: list[str]) -> None:
        super().check_legs(legs)
        if isinstance(self.normalization, dict) and set(self.normalization) != set(legs):
            raise ValueError(f"retrieval.fusion.normalization: name one normalization per leg of retrieval.legs "
                             f"{legs}; got {sorted(self.normalization)}")

    def leg_normalization(self, leg: str) -> str:
        return self.normalization[leg] if isinstance(self.normalization, dict) else self.normalization


@FUSIONS.register("weighted", WeightedParams)
def weighted_fuse(leg_results: dict[str, LegResult], params: WeightedParams, top_k: int) -> list[Hit]:
    """Convex combination of normalized leg scores; a missing chunk gets the leg's floor."""
    (first, a), (second, b) = two_legs(leg_results, "weighted")
    scores, ranks = evidence({first: a, second: b})
    weights = {first: params.weight, second: 1.0 - params.weight}
    norm: dict[str, dict[int, float]] = {}
    floor: dict[str, float] = {}
    for leg, ranked in ((first, a), (second, b)):
        values = normalize([s for _, s in ranked], params.leg_normalization(leg))
        norm[leg] = {}
        for (c, _), v in zip(ranked, values):
            norm[leg].setdefault(c, float(v))
        floor[leg] = float(values.min()) if params.missing == "min" and len(values) else 0.0
    candidates = list(dict.fromkeys([c for c, _ in a] + [c for c, _ in b]))
    fused = {c: sum(weights[leg] * norm[leg].get(c, floor[leg]) for leg in (first, second)) for c in candidates}
    legs = [first, second]
    match_types = {c: leg_names_match_type([leg for leg in legs if c in norm[leg]], legs) for c in candidates}
    return ranked_hits(candidates, fused, scores, ranks, match_types, top_k)
