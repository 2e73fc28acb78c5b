"""``z-score``: (s - mean) / std over the leg's list (ranx's ``zmuv``: population std, floored at 1e-9)."""
from __future__ import annotations

import numpy as np

EPSILON = 1e-9


def z_score_norm(scores: np.ndarray) -> np.ndarray:
    scores = np.asarray(scores, dtype=np.float64)
    if scores.size == 0:
        return scores
    return (scores - scores.mean()) / max(float(scores.std()), EPSILON)
