"""``dbsf``: distribution-based score fusion's scaling: map [mean - 3 std, mean + 3 std] onto [0, 1].

(s - (mean - 3 std)) / (6 std), population std over the leg's list, denominator floored at 1e-9, so
all-equal scores come out 0 (as min-max). Not clipped: a score beyond 3 std maps outside [0, 1], which
cannot happen for lists of 10 or fewer (|z| <= sqrt(n - 1)).
"""
from __future__ import annotations

import numpy as np

EPSILON = 1e-9


def dbsf_norm(scores: np.ndarray) -> np.ndarray:
    scores = np.asarray(scores, dtype=np.float64)
    if scores.size == 0:
        return scores
    mean, std = scores.mean(), float(scores.std())
    return (scores - (mean - 3 * std)) / max(6 * std, EPSILON)
