"""``weighted``: a convex combination of two legs' normalized scores.

score = weight * norm(first leg) + (1 - weight) * norm(second leg), over the union of both legs' lists.
Normalizations (kbench/retrieval/fusion/normalization): none, min-max, z-score, rank, dbsf, each computed
over the list the leg returned (its top ``candidates_per_leg``). One name applies to both legs; a mapping
names one per leg (``{vector: none, bm25: min-max}``: cosine is already on a fixed scale, BM25 is not).

A candidate only one leg returned needs a score from the other leg, ``missing_score`` (``missing`` until
2026-11, still read):

- ``min`` (default): that leg's lowest normalized score for this query (0 for min-max, 1/n for rank, the most
  negative z for z-score), i.e. "no better than the leg's last result";
- ``zero``: a flat 0 after normalization (ranx's ``wsum`` and AutoRAG's ``hybrid_cc`` on the legs' own lists;
  equal to ``min`` for min-max);
- ``union``: each leg scores every candidate of the union itself (its own score of a unit it did not return,
  ``Leg.score``: cosine, BM25, the PostgreSQL rank) and normalizes over the union, as AutoRAG's hybrid
  retrieval does (it fetches each retriever's scores of the other's ids before ``hybrid_cc``); nothing is
  missing then. Both legs must search the same units and be able to score any of them (vector, bm25,
  postgres_fts); a leg's rank and score in the result stay those of its own list.

A leg that returned nothing for the query adds the same constant to every chunk (0), so the other leg alone
decides the order. Ties keep the first leg's order, then the second leg's.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from kbench.records import Hit
from kbench.registry import rename_keys
from kbench.retrieval.contracts import LegResult
from kbench.retrieval.fusion.common import TwoLegParams, evidence, leg_names_match_type, ranked_hits, two_legs
from kbench.retrieval.fusion.normalization import Normalization, normalize
from kbench.retrieval.registry import FUSIONS


class WeightedParams(TwoLegParams):
    method = "weighted"
    leg_order = "[leg weighted by weight, leg weighted by 1 - weight] (e.g. [vector, bm25])"
    hashed_as = {"missing_score": "missing"}  # renamed: run keys hash it under its old name
    renamed_keys = {"missing": "missing_score"}  # the old spelling still works (a deprecation note says so)
    weight: float = Field(0.5, ge=0, le=1, description="weight of the first leg in retrieval.legs; "
                                                        "the second gets 1 - weight")
    normalization: Normalization | dict[str, Normalization] = Field(
        "min-max", description="none | min-max | z-score | rank | dbsf, or one per leg: {vector: none, bm25: min-max}")
    missing_score: Literal["min", "zero", "union"] = Field(
        "min", description="score of a candidate a leg did not return: min = the leg's lowest normalized score; "
                           "zero = 0 after normalization (ranx wsum); union = the leg's own score of it, normalized "
                           "over the union of both lists (AutoRAG)")

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        return rename_keys(data, cls.renamed_keys, "retrieval.fusion")

    def check_legs(self, legs: list[str]) -> None:
        super().check_legs(legs)
        if isinstance(self.normalization, dict) and set(self.normalization) != set(legs):
            raise ValueError(f"retrieval.fusion.normalization: name one normalization per leg of retrieval.legs "
                             f"{legs}; got {sorted(self.normalization)}")

    def wants_unreturned_scores(self) -> bool:
        return self.missing_score == "union"

    def leg_normalization(self, leg: str) -> str:
        return self.normalization[leg] if isinstance(self.normalization, dict) else self.normalization


@FUSIONS.register("weighted", WeightedParams)
def weighted_fuse(leg_results: dict[str, LegResult], params: WeightedParams, top_k: int,
                  unreturned: dict[str, dict[int, float]] | None = None) -> list[Hit]:
    """Convex combination of normalized leg scores; a missing chunk gets the leg's floor, 0, or (``union``) the
    leg's own score of it from ``unreturned``, normalized with the rest."""
    (first, a), (second, b) = two_legs(leg_results, "weighted")
    scores, ranks = evidence({first: a, second: b})
    weights = {first: params.weight, second: 1.0 - params.weight}
    candidates = list(dict.fromkeys([c for c, _ in a] + [c for c, _ in b]))
    norm: dict[str, dict[int, float]] = {}
    floor: dict[str, float] = {}
    for leg, ranked in ((first, a), (second, b)):
        if params.missing_score == "union":
            extra = (unreturned or {}).get(leg, {})
            returned = {c for c, _ in ranked}
            missing = [c for c in candidates if c not in returned]
            if any(c not in extra for c in missing):
                raise ValueError(f"retrieval.fusion.missing_score union: leg {leg} gave no score for "
                                 f"{sum(c not in extra for c in missing)} candidates it did not return")
            # best first over the union: the leg's list, then the others by their score (stable: rank ties)
            ranked = sorted(list(ranked) + [(c, extra[c]) for c in missing], key=lambda cs: -cs[1])
        values = normalize([s for _, s in ranked], params.leg_normalization(leg))
        norm[leg] = {}
        for (c, _), v in zip(ranked, values):
            norm[leg].setdefault(c, float(v))
        floor[leg] = float(values.min()) if params.missing_score == "min" and len(values) else 0.0
    fused = {c: sum(weights[leg] * norm[leg].get(c, floor[leg]) for leg in (first, second)) for c in candidates}
    legs = [first, second]
    match_types = {c: leg_names_match_type([leg for leg in legs if leg in ranks.get(c, {})], legs)
                   for c in candidates}
    return ranked_hits(candidates, fused, scores, ranks, match_types, top_k)
