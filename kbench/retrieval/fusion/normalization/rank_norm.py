"""``rank``: 1 - (rank - 1) / n for the leg's n results (ranx's ``rank_norm``): best -> 1, last -> 1/n.

Only positions count; the scores themselves are ignored (ties keep the leg's order).
"""
from __future__ import annotations

import numpy as np


def rank_norm(scores: np.ndarray) -> np.ndarray:
    n = len(scores)
    return 1.0 - np.arange(n, dtype=np.float64) / max(n, 1)
