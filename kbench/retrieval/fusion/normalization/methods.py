"""Every normalization by name (``NORMALIZATIONS``) and ``normalize``, which applies one to a leg's scores."""
from __future__ import annotations

from typing import Callable

import numpy as np

from kbench.retrieval.fusion.normalization.dbsf_norm import dbsf_norm
from kbench.retrieval.fusion.normalization.min_max_norm import min_max_norm
from kbench.retrieval.fusion.normalization.no_norm import no_norm
from kbench.retrieval.fusion.normalization.rank_norm import rank_norm
from kbench.retrieval.fusion.normalization.z_score_norm import z_score_norm

NORMALIZATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "none": no_norm,
    "min-max": min_max_norm,
    "z-score": z_score_norm,
    "rank": rank_norm,
    "dbsf": dbsf_norm,
}


def normalize(scores, method: str) -> np.ndarray:
    """Normalize one leg's scores (best first) with the named method."""
    try:
        fn = NORMALIZATIONS[method]
    except KeyError:
        raise ValueError(f"unknown normalization {method!r}; allowed: {', '.join(NORMALIZATIONS)}") from None
    values = np.asarray(scores, dtype=np.float64)
    if method != "none" and len(values):
        values = tame_range(values)
    return fn(values)


HUGE = 2.0 ** 300  # about 2e90: far below where a square (1e154) or a difference (9e307) overflows float64


def tame_range(values: np.ndarray) -> np.ndarray:
    """Scores of extreme magnitude, scaled by a power of two (exact: only the exponent changes) so that the
    differences and squares inside a normalization stay finite. Every method but ``none`` gives the same
    result for ``c * scores`` as for ``scores`` (c > 0), so nothing else changes; ordinary scores pass as they are."""
    peak = float(np.max(np.abs(values)))
    if not HUGE < peak < np.inf:
        return values
    return np.ldexp(values, -np.frexp(peak)[1])


__all__ = ["NORMALIZATIONS", "normalize"]
