"""Do two evaluation sets rank configs alike, and how well does one set agree with itself?

Every function takes plain tables: ``scores`` maps a config label to its per-question scores (one float per
question; inside one set, every config lists the same questions in the same order). Two sets need the same
config labels, not the same questions.

- ``kendall_tau(x, y)``: Kendall's tau-b between two vectors of config means (+1: same order, -1: reversed;
  tied means count as neither concordant nor discordant, as ``scipy.stats.kendalltau`` does).
- ``tau_interval(a, b)``: a percentile bootstrap interval of that tau over questions: each resample draws each
  set's questions with replacement (independently: the sets hold different questions), takes the means and
  their tau.
- ``split_half_ceiling(scores)``: the tau between the config means on two disjoint random halves of one set's
  questions, median over seeded splits. It says how well the set agrees with itself: a generated set whose
  tau with the real questions reaches it ranks configs as well as the real set's own halves do. Each half has
  half the questions, so the ceiling is that of a set half the size (a conservative bar for the full set).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy.stats import kendalltau


def kendall_tau(x, y) -> float:
    """Kendall's tau-b of two equal-length vectors; NaN when either is constant (no order to compare)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or len(x) < 2:
        raise ValueError(f"kendall_tau needs two 1-d vectors of equal length >= 2, got {x.shape} and {y.shape}")
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    return float(kendalltau(x, y).statistic)


def _table(scores: Mapping[str, np.ndarray], labels: list[str]) -> np.ndarray:
    """configs x questions."""
    rows = [np.asarray(scores[label], dtype=float) for label in labels]
    if len({len(r) for r in rows}) != 1:
        raise ValueError("every config of one set needs a score for the same questions "
                         f"(lengths {sorted({len(r) for r in rows})})")
    if len(rows[0]) < 2:
        raise ValueError(f"a set needs at least 2 questions, got {len(rows[0])}")
    return np.vstack(rows)


def config_means(scores: Mapping[str, np.ndarray], labels: list[str] | None = None) -> np.ndarray:
    labels = list(scores) if labels is None else labels
    return _table(scores, labels).mean(axis=1)


def _common_labels(a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray]) -> list[str]:
    if set(a) != set(b):
        raise ValueError(f"the two sets rank different configs: only in the first {sorted(set(a) - set(b))}, "
                         f"only in the second {sorted(set(b) - set(a))}")
    if len(a) < 2:
        raise ValueError(f"a ranking needs at least 2 configs, got {len(a)}")
    return list(a)


def set_tau(a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray]) -> float:
    """Kendall's tau-b between the config means of two sets (same config labels)."""
    labels = _common_labels(a, b)
    return kendall_tau(config_means(a, labels), config_means(b, labels))


def tau_interval(a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray], confidence: float = 0.95,
                 n_resamples: int = 2_000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of ``set_tau(a, b)``, each set's questions resampled with replacement.
    Resamples where a set's means come out all equal (tau undefined) are left out."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    labels = _common_labels(a, b)
    ta, tb = _table(a, labels), _table(b, labels)
    rng = np.random.default_rng(seed)
    taus = np.empty(n_resamples)
    for i in range(n_resamples):
        ma = ta[:, rng.integers(0, ta.shape[1], ta.shape[1])].mean(axis=1)
        mb = tb[:, rng.integers(0, tb.shape[1], tb.shape[1])].mean(axis=1)
        taus[i] = kendall_tau(ma, mb)
    taus = taus[~np.isnan(taus)]
    if not len(taus):
        return math.nan, math.nan
    alpha = (1 - confidence) / 2
    low, high = np.percentile(taus, [100 * alpha, 100 * (1 - alpha)])
    return float(low), float(high)


def random_halves(n_questions: int, n_splits: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """``n_splits`` seeded splits of question positions into two disjoint halves of ``n_questions // 2`` each
    (with an odd count, one question sits out of each split)."""
    if n_questions < 4:
        raise ValueError(f"a split-half ceiling needs at least 4 questions (2 per half), got {n_questions}")
    rng = np.random.default_rng(seed)
    half = n_questions // 2
    out = []
    for _ in range(n_splits):
        order = rng.permutation(n_questions)
        out.append((order[:half], order[half:2 * half]))
    return out


def split_half_taus(scores: Mapping[str, np.ndarray], splits: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Per split, Kendall's tau-b between the config means on its first and its second half (NaN where a half's
    means are all equal)."""
    table = _table(scores, list(scores))
    if table.shape[0] < 2:
        raise ValueError(f"a ranking needs at least 2 configs, got {table.shape[0]}")
    return np.array([kendall_tau(table[:, first].mean(axis=1), table[:, second].mean(axis=1))
                     for first, second in splits])


@dataclass(frozen=True)
class Ceiling:
    median: float  # the median tau over the splits (NaN splits left out)
    low: float  # 25th percentile
    high: float  # 75th percentile
    n_splits: int
    half: int  # questions per half

    def text(self) -> str:
        return f"{self.median:+.3f} [{self.low:+.3f}, {self.high:+.3f}]"


def split_half_ceiling(scores: Mapping[str, np.ndarray], n_splits: int = 200, seed: int = 0) -> Ceiling:
    """How well one set agrees with itself: tau between its two random halves, median (and quartiles) over
    ``n_splits`` seeded splits."""
    n = len(next(iter(scores.values())))
    taus = split_half_taus(scores, random_halves(n, n_splits, seed))
    taus = taus[~np.isnan(taus)]
    if not len(taus):
        return Ceiling(math.nan, math.nan, math.nan, n_splits, n // 2)
    low, median, high = np.percentile(taus, [25, 50, 75])
    return Ceiling(float(median), float(low), float(high), n_splits, n // 2)
