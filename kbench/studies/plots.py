"""What the notebooks' curves share: each point is a mean over the questions with its interval, on a y-axis that
starts at 0.

    from kbench.studies.plots import curve, from_zero
    curve(ax, budgets, [result.per_query[f"span_recall_at_budget_{n}"] for n in budgets], label="fixed-600")
    curve(ax, weights, runs, "chunk_ndcg_at_10")   # RunResults: the metric's per-query column of each
    from_zero(ax)                                  # 0 to 1.02 for a share, 0 to the top otherwise

A curve of means alone hides how little 20 or 98 questions can tell apart (issue 53: the notebooks' curves had no
error bars, and their y-axes were cut at the data, so a 0.02 wiggle looked like a trend). The interval is Student's
t over the per-query scores (``interval``), the one kbench's tables give beside a mean; questions with no score
(NaN: no judged document) are left out, as the means leave them out.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

CONFIDENCE = 0.95


def interval(values, confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(mean, low, high): the mean of ``values`` (NaN left out) and its Student's t interval; low == high == mean for
    fewer than two values or no spread."""
    from scipy import stats

    scores = np.asarray(values, dtype=float)
    scores = scores[~np.isnan(scores)]
    if scores.size == 0:
        return math.nan, math.nan, math.nan
    mean = float(scores.mean())
    if scores.size < 2 or float(scores.std(ddof=1)) == 0.0:
        return mean, mean, mean
    half = float(stats.t.ppf(0.5 + confidence / 2, scores.size - 1) * scores.std(ddof=1) / math.sqrt(scores.size))
    return mean, mean - half, mean + half


def scores_of(point: Any, metric: str | None) -> np.ndarray:
    """A point's per-query scores: a RunResult's column ``metric``, or the values themselves."""
    if hasattr(point, "per_query"):
        if metric is None:
            raise ValueError("a curve of runs needs the metric whose per-query scores it draws")
        return point.per_query[metric].to_numpy(dtype=float)
    return np.asarray(point, dtype=float)


def curve(ax, xs: Sequence, points: Sequence, metric: str | None = None, *, label: str | None = None,
          confidence: float = CONFIDENCE, **style) -> list[float]:
    """Draw means at ``xs`` with their t intervals as error bars (``points``: RunResults with ``metric``, or arrays of
    per-query scores); returns the means."""
    found = [interval(scores_of(p, metric), confidence) for p in points]
    means = np.array([m for m, _, _ in found])
    lows = np.array([lo for _, lo, _ in found])
    highs = np.array([hi for _, _, hi in found])
    style.setdefault("marker", "o")
    style.setdefault("capsize", 3)
    ax.errorbar(list(xs), means, yerr=[means - lows, highs - means], label=label, **style)
    return means.tolist()


def from_zero(ax, top: float | None = None) -> None:
    """The y-axis from 0, never cut at the data: to ``top`` when given, else 1.02 when every drawn value (error bars'
    ends included) is a share (at most 1), else 5% over the highest."""
    if top is None:
        highest = max((float(np.nanmax(line.get_ydata())) for line in ax.get_lines() if len(line.get_ydata())),
                      default=1.0)
        top = 1.02 if highest <= 1.0 else highest * 1.05
    ax.set_ylim(0, top)


def interval_note(n_questions: int, confidence: float = CONFIDENCE) -> str:
    """What the error bars are, for a figure's caption."""
    return f"error bars: {confidence:.0%} t interval of the mean over {n_questions} questions"
