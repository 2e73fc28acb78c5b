"""``min-max``: (s - min) / (max - min) over the leg's list; best -> 1, worst -> 0.

As ranx's ``min_max_norm``: the denominator is floored at 1e-9, so a list whose scores are all equal
(including a single result) normalizes to all 0.
"""
from __future__ import annotations

import numpy as np

EPSILON = 1e-9


def min_max_norm(scores: np.ndarray) -> np.ndarray:
    scores = np.asarray(scores, dtype=np.float64)
    if scores.size == 0:
        return scores
    low, high = scores.min(), scores.max()
    return (scores - low) / max(high - low, EPSILON)
