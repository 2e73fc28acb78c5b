"""``none``: raw scores, unchanged (cosine and BM25 then sit on their own, different scales)."""
from __future__ import annotations

import numpy as np


def no_norm(scores: np.ndarray) -> np.ndarray:
    return np.array(scores, dtype=np.float64)
