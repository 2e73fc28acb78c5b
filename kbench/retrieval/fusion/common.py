"""Helpers shared by fusion methods: two-leg params, per-leg evidence, match types, tie-stable sorting."""
from __future__ import annotations

import math
from typing import ClassVar

from kbench.records import Hit
from kbench.retrieval.contracts import FusionParams, LegResult


class TwoLegParams(FusionParams):
    """Params of a method that fuses exactly two legs, in the order ``leg_order`` says."""

    method: ClassVar[str]  # the config name, for the error message
    leg_order: ClassVar[str] = "[vector, text] (e.g. [vector, postgres_fts])"

    def check_legs(self, legs: list[str]) -> None:
        if len(legs) != 2:
            raise ValueError(f"retrieval.fusion.strategy {self.method!r} fuses exactly two legs, in the order "
                             f"{self.leg_order}; retrieval.legs is {legs}")


def two_legs(leg_results: dict[str, LegResult], method: str) -> tuple[tuple[str, LegResult], tuple[str, LegResult]]:
    """(vector leg, text leg) in retrieval.legs order; the config checks the count before a run starts."""
    if len(leg_results) != 2:
        raise ValueError(f"retrieval.fusion.strategy {method!r} fuses exactly two legs [vector, text], "
                         f"got {list(leg_results)}")
    first, second = leg_results.items()
    return first, second


def check_finite(leg_results: dict[str, LegResult]) -> None:
    """Refuse a leg score that is NaN or infinite: fused, it would put NaN in a ranking and every metric after it."""
    for leg, ranked in leg_results.items():
        for rank, (chunk, score) in enumerate(ranked, start=1):
            if not math.isfinite(score):
                raise ValueError(f"leg {leg} returned a score that is not a finite number ({score}) for chunk row "
                                 f"{chunk} at rank {rank}; a leg must score every hit with a finite number")


def evidence(leg_results: dict[str, LegResult]) -> tuple[dict[int, dict[str, float]], dict[int, dict[str, int]]]:
    """chunk -> {leg: raw score} and chunk -> {leg: 1-based rank}, for every chunk any leg returned (finite
    scores only: see ``check_finite``)."""
    check_finite(leg_results)
    scores: dict[int, dict[str, float]] = {}
    ranks: dict[int, dict[str, int]] = {}
    for leg, ranked in leg_results.items():
        for rank, (chunk, score) in enumerate(ranked, start=1):
            if leg not in ranks.setdefault(chunk, {}):  # a leg lists a chunk once; keep its best rank if not
                ranks[chunk][leg] = rank
                scores.setdefault(chunk, {})[leg] = float(score)
    return scores, ranks


def leg_names_match_type(found: list[str], legs: list[str]) -> str:
    """Which legs found a chunk: the leg's name, or 'hybrid' when every leg of a multi-leg run did."""
    if len(legs) > 1 and len(found) == len(legs):
        return "hybrid"
    return "+".join(found)


def ranked_hits(candidates: list[int], fused: dict[int, float], scores: dict[int, dict[str, float]],
                ranks: dict[int, dict[str, int]], match_types: dict[int, str], top_k: int) -> list[Hit]:
    """Sort ``candidates`` by fused score, best first. Python's sort is stable, so equal scores keep the
    order of ``candidates`` (each method states what that order is)."""
    order = sorted(candidates, key=lambda c: -fused[c])
    return [Hit(c, fused[c], leg_scores=dict(scores.get(c, {})), leg_ranks=dict(ranks.get(c, {})),
                match_type=match_types[c]) for c in order[:top_k]]
