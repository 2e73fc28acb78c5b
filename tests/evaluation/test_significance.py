"""Significance tests, corrections, effect size and bootstrap CIs against scipy.stats (and a closed-testing
reference for Holm), on per-query scores of two real runs over a demo sample."""
from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
from scipy import stats

from kbench.config import load_experiment
from kbench.evaluation.significance import (adjust_p_values, bonferroni, bootstrap_ci, holm,
                                            minimum_detectable_difference, non_inferiority, paired_effect_size,
                                            paired_t_test, percentile_difference_ci, percentile_permutation_test,
                                            questions_to_decide, randomization_test, rank_against_best,
                                            wilcoxon_signed_rank)
from kbench.runner import run_experiment
from tests.conftest import link_shared_cache, make_config


@pytest.fixture(scope="module")
def two_runs(shared_cache_workspace, tmp_path_factory):
    """Per-query metrics of two real demo runs that differ in chunk size (same queries, same order)."""
    ws = tmp_path_factory.mktemp("sig-ws")
    link_shared_cache(ws, shared_cache_workspace)
    out = []
    for size, overlap in ((600, 100), (1000, 0)):
        data = make_config(ws, dataset={"name": "demo", "max_documents": 1, "max_queries": 20, "seed": 7},
                           chunking={"strategy": "fixed", "chunk_size": size, "chunk_overlap": overlap},
                           retrieval={"legs": ["vector"], "top_k": 20, "latency": "batch"})
        out.append(run_experiment(load_experiment(data), progress=False, log=False).per_query)
    a, b = out
    assert list(a["query_id"]) == list(b["query_id"])
    return a, b


def metric_pairs(two_runs):
    a, b = two_runs
    cols = [c for c in a.columns if c.startswith(("doc_", "chunk_")) and a[c].dtype.kind == "f"]
    return [(c, a[c].to_numpy(), b[c].to_numpy()) for c in cols if not np.array_equal(a[c], b[c])]


def test_real_runs_differ_on_some_metrics(two_runs):
    assert len(metric_pairs(two_runs)) >= 5


def test_t_test_matches_scipy(two_runs):
    for name, a, b in metric_pairs(two_runs):
        ours = paired_t_test(a, b)
        ref = stats.ttest_rel(b, a)
        assert ours.statistic == pytest.approx(ref.statistic, rel=1e-9), name
        assert ours.p_value == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-15), name


def test_wilcoxon_matches_scipy_with_ties_and_zeros(two_runs):
    for name, a, b in metric_pairs(two_runs):
        d = b - a
        assert (d == 0).any() or len(np.unique(np.abs(d))) < len(d)  # real IR scores tie a lot
        ours = wilcoxon_signed_rank(a, b)
        nonzero = d[d != 0]
        if len(np.unique(np.abs(nonzero))) == len(nonzero):  # zeros dropped, no ties left: the exact law
            ref = stats.wilcoxon(nonzero, method="exact")
        else:
            ref = stats.wilcoxon(b, a, method="asymptotic", correction=False)
        assert ours.statistic == pytest.approx(ref.statistic), name
        assert ours.p_value == pytest.approx(ref.pvalue, rel=1e-9), name


@pytest.mark.parametrize("n", [5, 12, 30, 50])
def test_wilcoxon_exact_matches_scipy_without_ties(n):
    rng = np.random.default_rng(n)
    a, b = rng.random(n), rng.random(n) + 0.1
    ours = wilcoxon_signed_rank(a, b)
    ref = stats.wilcoxon(b, a, method="exact")
    assert ours.statistic == ref.statistic
    assert ours.p_value == pytest.approx(ref.pvalue, rel=1e-12)


def test_wilcoxon_all_equal_is_not_significant():
    x = np.array([0.2, 0.5, 1.0])
    assert wilcoxon_signed_rank(x, x).p_value == 1.0


def test_randomization_exact_matches_scipy_permutation_test():
    rng = np.random.default_rng(1)
    a = rng.random(12)
    b = a + rng.normal(0.1, 0.2, 12)
    ours = randomization_test(a, b, n_resamples=10_000)
    ref = stats.permutation_test((b - a,), np.mean, permutation_type="samples", n_resamples=10_000)
    assert ours.p_value == pytest.approx(ref.pvalue, rel=1e-12)


def test_randomization_sampled_agrees_with_scipy_within_monte_carlo_error(two_runs):
    for name, a, b in metric_pairs(two_runs)[:4]:
        ours = randomization_test(a, b, n_resamples=20_000, seed=3).p_value
        ref = stats.permutation_test((b - a,), np.mean, permutation_type="samples", n_resamples=20_000,
                                     random_state=7).pvalue
        # two independent Monte Carlo estimates: standard error <= 0.5 / sqrt(20000) each
        assert abs(ours - ref) < 0.015, (name, ours, ref)


def test_randomization_agrees_with_ranx_fisher(two_runs):
    from ranx.statistical_tests.fisher_randomization_test import fisher_randomization_test

    name, a, b = metric_pairs(two_runs)[0]
    ours = randomization_test(a, b, n_resamples=20_000, seed=1).p_value
    ref, _ = fisher_randomization_test(a, b, n_permutations=20_000, max_p=0.05, random_seed=42)
    assert abs(ours - ref) < 0.015, (name, ours, ref)


def test_effect_size_is_mean_over_sd_of_differences(two_runs):
    for name, a, b in metric_pairs(two_runs):
        d = b - a
        assert paired_effect_size(a, b) == pytest.approx(d.mean() / d.std(ddof=1)), name
        assert paired_effect_size(a, b) == pytest.approx(-paired_effect_size(b, a)), name


def test_bootstrap_ci_matches_scipy_percentile(two_runs):
    for name, a, b in metric_pairs(two_runs)[:4]:
        d = b - a
        low, high = bootstrap_ci(d, n_resamples=20_000, seed=0)
        ref = stats.bootstrap((d,), np.mean, method="percentile", n_resamples=20_000, random_state=0,
                              confidence_level=0.95).confidence_interval
        # two Monte Carlo estimates of the same percentiles; means of 0/1-ish scores sit on a lattice of
        # step min|d|/n, so allow one step beyond 5% of the width
        tol = 0.05 * (ref.high - ref.low) + np.abs(d[d != 0]).min() / len(d) + 1e-12
        assert low <= d.mean() <= high, name
        assert abs(low - ref.low) <= tol, name
        assert abs(high - ref.high) <= tol, name


def closed_testing_holm(p):
    """Holm as closed testing with Bonferroni local tests: adjusted p_i = max over every set S holding i of
    min(1, |S| * min_{j in S} p_j). An independent (exponential) reference for small m."""
    m = len(p)
    out = []
    for i in range(m):
        worst = 0.0
        for size in range(1, m + 1):
            for subset in combinations(range(m), size):
                if i in subset:
                    worst = max(worst, min(1.0, size * min(p[j] for j in subset)))
        out.append(worst)
    return np.array(out)


@pytest.mark.parametrize("seed", range(6))
def test_holm_equals_closed_testing(seed):
    rng = np.random.default_rng(seed)
    p = rng.random(6) ** 3
    p[seed % 6] = p[(seed + 1) % 6]  # a tie
    np.testing.assert_allclose(holm(p), closed_testing_holm(p), rtol=1e-12)


def test_holm_between_raw_and_bonferroni():
    p = np.array([0.01, 0.04, 0.03, 0.005, 0.2])
    h, b = holm(p), bonferroni(p)
    assert (p <= h + 1e-15).all() and (h <= b + 1e-15).all()
    np.testing.assert_allclose(b, np.minimum(1, p * 5))


def test_adjust_leaves_nan_out_and_rejects_unknown_methods():
    adjusted = adjust_p_values([0.01, float("nan"), 0.02], "bonferroni")
    assert np.isnan(adjusted[1])
    np.testing.assert_allclose(adjusted[[0, 2]], [0.02, 0.04])
    with pytest.raises(ValueError, match="holm, bonferroni, fdr_bh, none"):
        adjust_p_values([0.1], "sidak")


def test_paired_inputs_are_checked():
    with pytest.raises(ValueError, match="equal length"):
        paired_t_test([1, 2, 3], [1, 2])


def test_non_inferiority_is_scipys_one_sided_t_on_the_shifted_differences(two_runs):
    for metric, a, b in metric_pairs(two_runs)[:6]:
        for margin in (0.0, 0.01, 0.05):
            found = non_inferiority(a, b, margin)
            expected = stats.ttest_1samp(b - a + margin, 0.0, alternative="greater")
            assert found.p_value == pytest.approx(expected.pvalue, rel=1e-10, abs=1e-15), metric
            # the rule as the issue states it: the one-sided 95% lower bound above -margin <=> p < 0.05
            low = expected.confidence_interval(0.95).low - margin  # scipy's bound on mean(d + margin)
            assert found.lower_bound == pytest.approx(low, rel=1e-10, abs=1e-12)
            assert (found.lower_bound > -margin) == (found.p_value < 0.05)
            assert found.difference == pytest.approx(float((b - a).mean()))


def test_non_inferiority_without_spread_assumes_one_questions_worth_of_it():
    """issue 50: differences that do not vary are no proof they never do. Ten questions on which two configs agree
    do not show them within 0.01; three hundred do; the spread taken is one question off by the whole scale."""
    few, many = np.full(10, 0.5), np.full(300, 0.5)
    assert non_inferiority(few, few, 0.01).p_value > 0.05
    assert non_inferiority(many, many, 0.01).p_value < 0.05
    spread = np.r_[np.ones(1), np.zeros(9)]  # one question off by 1: sd 1 / sqrt(10)
    assert non_inferiority(few, few, 0.01).sd == pytest.approx(float(spread.std(ddof=1)))
    assert non_inferiority(few, few, 0.01).lower_bound == pytest.approx(
        -stats.t.ppf(0.95, 9) * spread.std(ddof=1) / np.sqrt(10))
    assert non_inferiority(many, many - 0.02, 0.01).p_value > 0.5  # 0.02 worse on every question: outside 0.01
    assert non_inferiority(few, few, 0.0).p_value == 0.5  # a zero margin asks for better, not equal
    with pytest.raises(ValueError, match="margin"):
        non_inferiority(few, few, -0.01)


@pytest.mark.parametrize("sd, margin", [(0.3, 0.01), (0.25, 0.05), (0.1, 0.02), (0.02, 0.01)])
def test_questions_to_decide_is_the_smallest_n_whose_one_sided_mde_fits_the_margin(sd, margin):
    n = questions_to_decide(sd, margin, alpha=0.05, power=0.8)
    assert minimum_detectable_difference(sd, n, 0.1, 0.8) <= margin
    assert n == 2 or minimum_detectable_difference(sd, n - 1, 0.1, 0.8) > margin
    normal = ((stats.norm.ppf(0.95) + stats.norm.ppf(0.8)) * sd / margin) ** 2  # the large-n answer
    assert normal <= n <= normal + 10
    assert questions_to_decide(0.0, 0.01) == 2 and questions_to_decide(0.3, 0.0) is None


def test_percentile_tests_match_scipy(two_runs):
    a, b = two_runs
    latency_a = np.random.default_rng(5).gamma(2.0, 3.0, 12)
    latency_b = latency_a * np.random.default_rng(6).uniform(0.8, 1.6, 12)
    statistic = lambda x, y, axis: np.percentile(y, 95, axis=axis) - np.percentile(x, 95, axis=axis)  # noqa: E731
    exact = stats.permutation_test((latency_a, latency_b), statistic, permutation_type="samples",
                                   n_resamples=np.inf)
    found = percentile_permutation_test(latency_a, latency_b, 95, n_resamples=10_000)
    assert found.p_value == pytest.approx(exact.pvalue, rel=1e-12)
    assert found.statistic == pytest.approx(exact.statistic)
    low, high = percentile_difference_ci(latency_a, latency_b, 95, n_resamples=4_000)
    assert low <= found.statistic <= high
    low, high = bootstrap_ci(latency_b, q=95, n_resamples=4_000)
    assert low <= np.percentile(latency_b, 95) <= high


def test_rank_against_best_ranks_a_latency_fastest_first():
    rng = np.random.default_rng(8)
    fast = rng.uniform(1, 2, 40)
    scores = {"slow": fast + 5, "fast": fast, "close": fast + rng.normal(0, 0.01, 40)}
    ranked = rank_against_best(scores, lower_is_better=True)
    assert [r.label for r in ranked][:1] in (["fast"], ["close"]) and ranked[-1].label == "slow"
    assert ranked[-1].verdict == "worse" and ranked[0].verdict == "best"
    by_p95 = rank_against_best(scores, lower_is_better=True, percentile=95, n_resamples=2_000)
    assert by_p95[0].mean == pytest.approx(min(np.percentile(v, 95) for v in scores.values()))
    assert by_p95[-1].label == "slow" and by_p95[-1].verdict == "worse"
