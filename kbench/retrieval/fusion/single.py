"""``none``: no fusion; the single leg's ranking passes through."""
from __future__ import annotations

from kbench.records import Hit
from kbench.retrieval.contracts import FusionParams, LegResult
from kbench.retrieval.fusion.common import check_finite
from kbench.retrieval.registry import FUSIONS


@FUSIONS.register("none", FusionParams)
def single_leg(leg_results: dict[str, LegResult], params: FusionParams, top_k: int) -> list[Hit]:
    """Pass one leg's ranking through unchanged."""
    check_finite(leg_results)
    (name, ranked), = leg_results.items()
    return [
        Hit(i, s, leg_scores={name: s}, leg_ranks={name: rank}, match_type=name)
        for rank, (i, s) in enumerate(ranked[:top_k], start=1)
    ]
