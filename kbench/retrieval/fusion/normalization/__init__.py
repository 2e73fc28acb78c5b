"""Score normalizations for score-based fusion, one module each (ranx's style: ``<name>_norm.py``).

Each is a pure function from one leg's scores (best first, as the leg returned them) to normalized
scores in the same order. Every one computes over the list it is given, i.e. the leg's returned top-k,
not over the whole corpus.
"""
from __future__ import annotations

from typing import Callable, Literal

import numpy as np

from kbench.retrieval.fusion.normalization.dbsf_norm import dbsf_norm
from kbench.retrieval.fusion.normalization.min_max_norm import min_max_norm
from kbench.retrieval.fusion.normalization.no_norm import no_norm
from kbench.retrieval.fusion.normalization.rank_norm import rank_norm
from kbench.retrieval.fusion.normalization.z_score_norm import z_score_norm

Normalization = Literal["none", "min-max", "z-score", "rank", "dbsf"]

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
    return fn(np.asarray(scores, dtype=np.float64))


__all__ = ["NORMALIZATIONS", "Normalization", "normalize"]
