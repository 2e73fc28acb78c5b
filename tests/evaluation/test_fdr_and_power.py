"""Benjamini–Hochberg against scipy.stats.false_discovery_control; the minimum detectable difference against
the normal approximation and a Monte Carlo power check."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from kbench.evaluation.significance import adjust_p_values, fdr_bh, holm, minimum_detectable_difference


@pytest.mark.parametrize("seed", range(8))
def test_fdr_bh_matches_scipy(seed):
    rng = np.random.default_rng(seed)
    p = np.concatenate([rng.random(20 + seed) ** 4, rng.random(5)])
    p[3] = p[7]  # a tie
    np.testing.assert_allclose(fdr_bh(p), stats.false_discovery_control(p, method="bh"), rtol=1e-12, atol=1e-15)


def test_fdr_bh_small_cases_and_ordering():
    np.testing.assert_allclose(fdr_bh([0.01, 0.04, 0.03, 0.005]), [0.02, 0.04, 0.04, 0.02])
    assert fdr_bh([]).shape == (0,)
    p = np.random.default_rng(1).random(30) ** 3
    assert (fdr_bh(p) <= holm(p) + 1e-15).all()  # never rejects less than Holm
    adjusted = adjust_p_values([0.01, float("nan"), 0.02], "fdr_bh")
    assert np.isnan(adjusted[1]) and np.allclose(adjusted[[0, 2]], [0.02, 0.02])


def test_mde_approaches_the_normal_formula_for_many_queries():
    n, sd = 5000, 0.3
    normal = (stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) * sd / math.sqrt(n)
    assert math.isclose(minimum_detectable_difference(sd, n), normal, rel_tol=2e-3)


def test_mde_has_the_stated_power_in_simulation():
    n, sd = 25, 0.2
    mde = minimum_detectable_difference(sd, n)
    rng = np.random.default_rng(0)
    d = rng.normal(mde, sd, size=(20_000, n))
    t = d.mean(axis=1) / (d.std(axis=1, ddof=1) / math.sqrt(n))
    power = np.mean(np.abs(t) > stats.t.ppf(0.975, n - 1))
    assert abs(power - 0.8) < 0.012  # Monte Carlo error at 20,000 draws is about 0.003


def test_mde_edges():
    assert math.isnan(minimum_detectable_difference(0.1, 1))
    assert minimum_detectable_difference(0.0, 30) == 0.0
    assert minimum_detectable_difference(0.1, 10) > minimum_detectable_difference(0.1, 40)
