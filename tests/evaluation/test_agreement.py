"""Kendall's tau between evaluation sets, its bootstrap interval, and the split-half ceiling, on hand-built
per-query tables whose answers are worked out by hand."""
from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pytest
from scipy.stats import kendalltau

from kbench.evaluation.agreement import (kendall_tau, random_halves, set_tau, split_half_ceiling, split_half_taus,
                                         tau_interval)

# 3 configs x 4 questions. Config means: a 0.5, b 0.5, c 0.25 on all four questions; per question:
TABLE = {"a": np.array([1.0, 1.0, 0.0, 0.0]),
         "b": np.array([0.0, 1.0, 1.0, 0.0]),
         "c": np.array([0.0, 0.0, 0.0, 1.0])}


def hand_tau(x, y) -> float:
    """tau-b from its definition: (concordant - discordant) / sqrt((n0 - ties in x)(n0 - ties in y))."""
    pairs = list(combinations(range(len(x)), 2))
    s = sum(np.sign(x[i] - x[j]) * np.sign(y[i] - y[j]) for i, j in pairs)
    tx = sum(x[i] == x[j] for i, j in pairs)
    ty = sum(y[i] == y[j] for i, j in pairs)
    return s / math.sqrt((len(pairs) - tx) * (len(pairs) - ty))


def test_kendall_tau_is_tau_b():
    assert kendall_tau([1, 2, 3], [10, 20, 30]) == 1.0
    assert kendall_tau([1, 2, 3], [3, 2, 1]) == -1.0
    assert kendall_tau([0.9, 0.5, 0.1], [0.5, 0.9, 0.1]) == pytest.approx(1 / 3)  # one of three pairs flips
    x, y = np.array([0.5, 0.5, 0.2, 0.1]), np.array([0.4, 0.6, 0.6, 0.0])  # ties on both sides
    assert kendall_tau(x, y) == pytest.approx(hand_tau(x, y)) == pytest.approx(kendalltau(x, y).statistic)
    assert math.isnan(kendall_tau([1, 1, 1], [1, 2, 3]))  # no order on one side
    with pytest.raises(ValueError):
        kendall_tau([1, 2], [1, 2, 3])


def test_split_half_taus_on_every_split_of_four_questions():
    # the three ways to halve four questions, each in both orders
    splits = [(np.array(f), np.array(s)) for f, s in [((0, 1), (2, 3)), ((0, 2), (1, 3)), ((0, 3), (1, 2)),
                                                      ((2, 3), (0, 1)), ((1, 3), (0, 2)), ((1, 2), (0, 3))]]
    taus = split_half_taus(TABLE, splits)
    # halves {0,1} | {2,3}: means a 1, b .5, c 0 | a 0, b .5, c .5 -> pairs ab -, ac -, bc tie in y: tau-b
    expected = []
    for first, second in splits:
        x = np.array([TABLE[k][first].mean() for k in "abc"])
        y = np.array([TABLE[k][second].mean() for k in "abc"])
        expected.append(hand_tau(x, y) if np.ptp(x) and np.ptp(y) else math.nan)
    np.testing.assert_allclose(taus, expected)
    assert taus[0] == pytest.approx(-2 / math.sqrt(3 * 2))  # worked by hand: s = -2, 3 pairs, one tie in y
    assert math.isnan(taus[1])  # {0,2}: a .5 b .5 c 0; {1,3}: a .5 b .5 c .5 -> the second half has no order


def test_split_half_ceiling_is_the_median_over_seeded_random_halves():
    rng = np.random.default_rng(5)
    truth = np.array([0.6, 0.5, 0.4, 0.3])
    table = {f"c{i}": np.clip(truth[i] + rng.normal(0, 0.3, 30), 0, 1) for i in range(4)}
    ceiling = split_half_ceiling(table, n_splits=50, seed=9)
    halves = random_halves(30, 50, seed=9)
    assert all(len(f) == len(s) == 15 and not set(f) & set(s) for f, s in halves)
    taus = split_half_taus(table, halves)
    taus = taus[~np.isnan(taus)]
    assert ceiling.median == pytest.approx(float(np.median(taus)))
    assert ceiling.low <= ceiling.median <= ceiling.high and ceiling.half == 15 and ceiling.n_splits == 50
    assert split_half_ceiling(table, n_splits=50, seed=9) == ceiling  # seeded: the same figure every time
    # a set whose configs are far apart agrees with itself perfectly
    apart = {f"c{i}": np.full(10, i / 10) + np.linspace(0, 0.01, 10) for i in range(4)}
    assert split_half_ceiling(apart, n_splits=20).median == 1.0
    with pytest.raises(ValueError, match="at least 4 questions"):
        split_half_ceiling({"a": np.ones(3), "b": np.zeros(3)})


def test_tau_interval_resamples_each_sets_questions():
    a = {"x": np.full(20, 0.9), "y": np.full(20, 0.5), "z": np.full(20, 0.1)}
    b = {"x": np.full(15, 0.5), "y": np.full(15, 0.9), "z": np.full(15, 0.1)}
    assert set_tau(a, b) == pytest.approx(1 / 3)
    assert tau_interval(a, b) == pytest.approx((1 / 3, 1 / 3))  # no spread over questions: the same every draw
    rng = np.random.default_rng(0)
    noisy = {k: np.clip(np.full(15, m) + rng.normal(0, 0.6, 15), 0, 1) for k, m in (("x", 0.55), ("y", 0.5),
                                                                                    ("z", 0.45))}
    low, high = tau_interval(a, noisy, n_resamples=500)
    assert -1 <= low <= set_tau(a, noisy) <= high <= 1 and low < high
    with pytest.raises(ValueError, match="different configs"):
        set_tau(a, {"x": np.ones(3), "y": np.ones(3)})
