"""Paired significance tests over per-query scores, multiple-comparison corrections, effect size, bootstrap CIs.

Every function takes plain arrays: ``a`` and ``b`` hold one score per query for two systems, aligned by query
(``a[i]`` and ``b[i]`` are the same query). Differences are ``b - a`` (the treatment minus the baseline).
The tests are two-sided and follow the textbook definitions that scipy.stats implements, so a p-value here
matches ``scipy.stats.ttest_rel``, ``scipy.stats.wilcoxon`` and ``scipy.stats.permutation_test``
(tests/evaluation/test_significance.py checks each one on real per-query scores).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import product

import numpy as np

from kbench.lazy import lazy_module

# a second to import, and a config reaches this module (through recommend.py) long before any test runs
optimize, stats = lazy_module("scipy.optimize"), lazy_module("scipy.stats")

# a p-value computed with floating point sums must not flip on the last bit: two sums that differ by less
# than this (relative) are treated as equal, as scipy's permutation_test does
_REL_TOL = 1e-12


@dataclass(frozen=True)
class TestResult:
    statistic: float
    p_value: float


def _paired(a, b) -> np.ndarray:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired tests need two 1-d arrays of equal length, got shapes {a.shape} and {b.shape}")
    if len(a) < 2:
        raise ValueError(f"paired tests need at least 2 queries, got {len(a)}")
    return b - a


def paired_t_test(a, b) -> TestResult:
    """Student's paired t-test: t = mean(d) / (sd(d) / sqrt(n)), n - 1 degrees of freedom."""
    d = _paired(a, b)
    n = len(d)
    sd = d.std(ddof=1)
    if sd == 0:  # every query moved by the same amount: no spread to test against
        return TestResult(float("nan"), float("nan")) if d[0] == 0 else TestResult(math.copysign(math.inf, d[0]), 0.0)
    t = d.mean() / (sd / math.sqrt(n))
    return TestResult(float(t), float(2 * stats.t.sf(abs(t), n - 1)))


def _exact_signed_rank_counts(n: int) -> np.ndarray:
    """counts[w] = how many of the 2**n sign patterns give a positive-rank sum of w (ranks 1..n, no ties)."""
    counts = np.zeros(n * (n + 1) // 2 + 1, dtype=np.float64)
    counts[0] = 1
    for r in range(1, n + 1):
        counts[r:] = counts[r:] + counts[:-r].copy()
    return counts


def wilcoxon_signed_rank(a, b, exact_below: int = 50) -> TestResult:
    """Wilcoxon signed-rank test on the paired differences; zero differences are dropped ("wilcox").

    Exact null distribution when fewer than ``exact_below`` non-zero differences and no ties among their
    magnitudes; otherwise the normal approximation with the tie correction and no continuity correction.
    The statistic is min(W+, W-), as scipy reports it.
    """
    d = _paired(a, b)
    d = d[d != 0]
    n = len(d)
    if n == 0:  # the systems agree on every query
        return TestResult(0.0, 1.0)
    ranks = stats.rankdata(np.abs(d))
    w_plus = float(ranks[d > 0].sum())
    w_minus = float(ranks[d < 0].sum())
    statistic = min(w_plus, w_minus)
    has_ties = len(np.unique(np.abs(d))) < n
    if n <= exact_below and not has_ties:
        counts = _exact_signed_rank_counts(n)
        cdf = counts[: int(statistic) + 1].sum() / 2.0**n
        return TestResult(statistic, float(min(1.0, 2 * cdf)))
    mean = n * (n + 1) / 4
    _, tie_sizes = np.unique(ranks, return_counts=True)
    var = n * (n + 1) * (2 * n + 1) / 24 - (tie_sizes**3 - tie_sizes).sum() / 48
    z = (statistic - mean) / math.sqrt(var)
    return TestResult(statistic, float(min(1.0, 2 * stats.norm.cdf(z))))


def randomization_test(a, b, n_resamples: int = 10_000, seed: int = 0) -> TestResult:
    """Paired randomization (Fisher's sign-flip) test on the mean difference.

    Under the null hypothesis each query's two scores are exchangeable, so the sign of each difference is a
    coin flip. Exact (all 2**n sign patterns) when 2**n <= n_resamples; otherwise ``n_resamples`` random
    patterns with the +1 correction (the observed pattern counts as one), as scipy.stats.permutation_test does.
    """
    d = _paired(a, b)
    n = len(d)
    observed = d.mean()
    threshold = abs(observed) * (1 - _REL_TOL)
    if 2**n <= n_resamples:
        signs = np.array(list(product((1.0, -1.0), repeat=n)))
        null = np.abs(signs @ d) / n
        return TestResult(float(observed), float(np.mean(null >= threshold)))
    rng = np.random.default_rng(seed)
    hits = 0
    done = 0
    while done < n_resamples:  # in blocks, to bound memory on large query sets
        size = min(10_000, n_resamples - done)
        signs = rng.choice((-1.0, 1.0), size=(size, n))
        hits += int(np.sum(np.abs(signs @ d) / n >= threshold))
        done += size
    return TestResult(float(observed), float((hits + 1) / (n_resamples + 1)))


def paired_effect_size(a, b) -> float:
    """Cohen's d for paired samples (d_z): mean difference over the standard deviation of the differences."""
    d = _paired(a, b)
    sd = d.std(ddof=1)
    if sd == 0:
        return 0.0 if d.mean() == 0 else math.copysign(math.inf, d.mean())
    return float(d.mean() / sd)


def bootstrap_ci(values, confidence: float = 0.95, n_resamples: int = 2_000, seed: int = 0,
                 q: float | None = None) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean (resample queries with replacement); with ``q``, of the q-th
    percentile instead (a run's p95 latency).

    For a paired difference pass ``b - a``: resampling the differences keeps each query's pair together.
    """
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or len(x) == 0:
        raise ValueError(f"bootstrap_ci needs a non-empty 1-d array, got shape {x.shape}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    rng = np.random.default_rng(seed)
    means = np.empty(n_resamples)
    for start in range(0, n_resamples, 1_000):
        stop = min(start + 1_000, n_resamples)
        idx = rng.integers(0, len(x), size=(stop - start, len(x)))
        means[start:stop] = x[idx].mean(axis=1) if q is None else np.percentile(x[idx], q, axis=1)
    alpha = (1 - confidence) / 2
    low, high = np.percentile(means, [100 * alpha, 100 * (1 - alpha)])
    return float(low), float(high)


def percentile_difference_ci(a, b, q: float, confidence: float = 0.95, n_resamples: int = 2_000,
                             seed: int = 0) -> tuple[float, float]:
    """Paired percentile bootstrap interval of percentile(b, q) - percentile(a, q): the same resampled queries
    for both, so each query's pair stays together (a percentile of differences is not a difference of
    percentiles)."""
    _paired(a, b)
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    rng = np.random.default_rng(seed)
    out = np.empty(n_resamples)
    for start in range(0, n_resamples, 1_000):
        stop = min(start + 1_000, n_resamples)
        idx = rng.integers(0, len(a), size=(stop - start, len(a)))
        out[start:stop] = np.percentile(b[idx], q, axis=1) - np.percentile(a[idx], q, axis=1)
    alpha = (1 - confidence) / 2
    low, high = np.percentile(out, [100 * alpha, 100 * (1 - alpha)])
    return float(low), float(high)


def percentile_permutation_test(a, b, q: float, n_resamples: int = 10_000, seed: int = 0) -> TestResult:
    """Paired permutation test of percentile(b, q) - percentile(a, q), two-sided.

    Under the null hypothesis each query's two values are exchangeable, so swapping them at random gives the
    difference's null distribution; this is the randomization test with a percentile in place of the mean.
    Exact (all 2**n swaps) when 2**n <= n_resamples, otherwise ``n_resamples`` random swaps with the +1
    correction. The statistic is the observed difference.
    """
    _paired(a, b)
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    n = len(a)
    observed = float(np.percentile(b, q) - np.percentile(a, q))
    threshold = abs(observed) * (1 - _REL_TOL)

    def exceed(swap: np.ndarray) -> int:  # swap: (resamples, n) booleans, True = the pair's values swapped
        first, second = np.where(swap, b, a), np.where(swap, a, b)
        return int(np.sum(np.abs(np.percentile(second, q, axis=1) - np.percentile(first, q, axis=1)) >= threshold))

    if 2**n <= n_resamples:
        swaps = np.array(list(product((False, True), repeat=n)))
        return TestResult(observed, exceed(swaps) / len(swaps))
    rng = np.random.default_rng(seed)
    hits = done = 0
    while done < n_resamples:  # in blocks, to bound memory on large query sets
        size = min(2_000, n_resamples - done)
        hits += exceed(rng.random((size, n)) < 0.5)
        done += size
    return TestResult(observed, (hits + 1) / (n_resamples + 1))


def bonferroni(p_values) -> np.ndarray:
    """Bonferroni-adjusted p-values: p * m, capped at 1 (m = number of comparisons)."""
    p = np.asarray(p_values, dtype=float)
    return np.minimum(1.0, p * len(p))


def holm(p_values) -> np.ndarray:
    """Holm's step-down adjusted p-values (same order as given).

    Sorted ascending, the i-th smallest (0-based) is multiplied by (m - i); a running maximum keeps the
    adjusted values monotone, and each is capped at 1. Rejecting where adjusted p < alpha controls the
    family-wise error rate at alpha, and never rejects less than Bonferroni.
    """
    p = np.asarray(p_values, dtype=float)
    m = len(p)
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, np.maximum.accumulate(p[order] * (m - np.arange(m))))
    adjusted = np.empty(m)
    adjusted[order] = scaled
    return adjusted


def fdr_bh(p_values) -> np.ndarray:
    """Benjamini–Hochberg adjusted p-values (same order as given), as scipy.stats.false_discovery_control.

    Sorted ascending, the i-th smallest (1-based) is multiplied by m / i; a running minimum from the largest
    down keeps them monotone, each capped at 1. Rejecting where adjusted p < alpha controls the expected
    share of false discoveries among the rejections at alpha (independent or positively dependent tests):
    the correction for a whole sweep, where Holm's family-wise control would find almost nothing.
    """
    p = np.asarray(p_values, dtype=float)
    m = len(p)
    if m == 0:
        return p.copy()
    order = np.argsort(p, kind="stable")
    scaled = p[order] * m / np.arange(1, m + 1)
    scaled = np.minimum(1.0, np.minimum.accumulate(scaled[::-1])[::-1])
    adjusted = np.empty(m)
    adjusted[order] = scaled
    return adjusted


def minimum_detectable_difference(sd_of_differences: float, n: int, alpha: float = 0.05,
                                  power: float = 0.8) -> float:
    """The smallest true mean difference a two-sided paired t-test on ``n`` queries finds with ``power``.

    Exact: the effect size ``d`` where the noncentral t distribution (df = n - 1, noncentrality d·sqrt(n))
    puts ``power`` beyond the critical values, times the standard deviation of the per-query differences.
    A difference below it may be real, but this many queries will usually miss it (statsmodels'
    TTestPower.solve_power gives the same d). NaN with fewer than 2 queries; 0 when the differences do not
    vary.
    """
    if n < 2 or not np.isfinite(sd_of_differences):
        return math.nan
    if sd_of_differences == 0:
        return 0.0
    df = n - 1
    critical = stats.t.ppf(1 - alpha / 2, df)

    def shortfall(d: float) -> float:
        nc = d * math.sqrt(n)
        lower = stats.nct.cdf(-critical, df, nc)  # far from the null this tail underflows (NaN in scipy)
        return float(stats.nct.sf(critical, df, nc) + (0.0 if math.isnan(lower) else lower) - power)

    normal = (stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)) / math.sqrt(n)  # the large-n answer
    high = 2 * normal
    while shortfall(high) < 0:
        high *= 2
    return float(optimize.brentq(shortfall, 0.0, high, xtol=1e-14) * sd_of_differences)


@dataclass(frozen=True)
class NonInferiority:
    """A candidate against a reference on one metric: is the candidate shown to be at most ``margin`` worse?"""

    difference: float  # mean(candidate - reference) over the questions
    lower_bound: float  # its one-sided (1 - alpha) lower confidence bound
    margin: float  # in the metric's units (> 0: how much worse still counts as as good)
    p_value: float  # of H0: difference <= -margin (small: the candidate is shown within the margin)
    sd: float  # standard deviation of the per-question differences
    n: int

    def shown(self, alpha: float = 0.05) -> bool:
        return self.p_value < alpha


def non_inferiority(reference, candidate, margin: float, alpha: float = 0.05, scale: float = 1.0) -> NonInferiority:
    """One-sided paired t-test of H0: mean(candidate - reference) <= -margin against H1: it is above -margin.

    ``p < alpha`` exactly when the one-sided (1 - alpha) lower confidence bound of the mean difference,
    mean - t(1 - alpha, n - 1) * sd / sqrt(n), is above -margin: the bound the recommendation's rule is stated
    in. Why the t-test: a percentile bootstrap interval covers too little at 15 to 30 questions, and a sign-flip
    test of the shifted differences (d + margin) assumes they are symmetric about 0 under H0, an assumption no
    weaker than the t's (a mean of bounded scores is close to normal); the t has the power calculation kbench
    already uses (``minimum_detectable_difference``), so the questions a set would need are computed for the
    test that decides. Differences that do not vary (every question moved by the same amount: often configs that
    agree on every one of a few questions) are no evidence that they never vary: the test then takes the spread one
    question differing by the metric's whole ``scale`` would give, sd = scale / sqrt(n), so ten questions on which
    eight configs agree do not decide at a 0.01 margin (they did, for a pick 0.07 worse on the whole set:
    benchmarks/decision_bound.py), and two configs equal on 300 questions are shown within it.
    """
    d = _paired(reference, candidate)
    n = len(d)
    if margin < 0 or not math.isfinite(margin):
        raise ValueError(f"a non-inferiority margin is a finite difference >= 0, got {margin}")
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    shifted = mean + margin
    if sd == 0:  # no spread seen: assume one question's worth of it
        sd = scale / math.sqrt(n)
    se = sd / math.sqrt(n)
    p = float(stats.t.sf(shifted / se, n - 1))
    return NonInferiority(mean, mean - float(stats.t.ppf(1 - alpha, n - 1)) * se, margin, p, sd, n)


def questions_to_decide(sd_of_differences: float, margin: float, alpha: float = 0.05, power: float = 0.8,
                        limit: int = 10_000_000) -> int | None:
    """How many questions a one-sided non-inferiority test at ``alpha`` needs to show two configs that are truly
    equal within ``margin`` with ``power``: the smallest n whose minimum detectable difference (the same
    noncentral-t calculation, at two-sided 2 * alpha, i.e. one-sided alpha) is at most the margin, for per-question
    differences spread by ``sd_of_differences``. None when no n up to ``limit`` is enough (a zero margin)."""
    if not math.isfinite(sd_of_differences) or sd_of_differences < 0:
        return None
    if sd_of_differences == 0:
        return 2
    if margin <= 0:
        return None

    def enough(n: int) -> bool:
        return minimum_detectable_difference(sd_of_differences, n, min(2 * alpha, 0.999), power) <= margin

    high = 2
    while not enough(high):
        if high >= limit:
            return None
        high = min(2 * high, limit)
    low = max(2, high // 2)
    if enough(low):
        return low
    while high - low > 1:  # enough(high), not enough(low)
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return high


def adjust_p_values(p_values, method: str) -> np.ndarray:
    """Correct for multiple comparisons: ``holm``, ``bonferroni``, ``fdr_bh`` or ``none``; NaN p-values are
    left out."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(len(p), np.nan)
    ok = ~np.isnan(p)
    if method == "none":
        out[ok] = p[ok]
    elif method in CORRECTIONS:
        out[ok] = CORRECTIONS[method](p[ok])
    else:
        raise ValueError(f"correction: unknown method {method!r}; allowed: {', '.join(CORRECTIONS)}, none")
    return out


CORRECTIONS = {"holm": holm, "bonferroni": bonferroni, "fdr_bh": fdr_bh}
TESTS = {"t": paired_t_test, "wilcoxon": wilcoxon_signed_rank, "randomization": randomization_test}


@dataclass(frozen=True)
class VersusBest:
    """One config of a ranking: its value (the mean, or a percentile), its test against the best and the verdict."""

    label: str
    mean: float
    p_value: float  # the test against the best (NaN for the best itself, or when the differences do not vary)
    p_adjusted: float  # corrected over every config but the best
    verdict: str  # best | tied (not significantly different from the best at alpha) | worse


def rank_against_best(scores, *, test: str = "randomization", correction: str = "holm", alpha: float = 0.05,
                      n_resamples: int = 10_000, seed: int = 0, lower_is_better: bool = False,
                      percentile: float | None = None) -> list[VersusBest]:
    """Configs best first by mean score, each other one tested against the best; the rule ``kbench compare``
    ranks by, over a plain table: ``scores`` maps a label to its per-query scores (the same queries, in the same
    order, for every label). Higher is better unless ``lower_is_better`` (latency, cost). With ``percentile``
    the configs are ranked by that percentile of their scores (a p95 latency) and tested with the paired
    permutation test of the percentile difference, whatever ``test`` says. Equal values keep the order given.
    The best and every config whose corrected p-value is not below ``alpha`` (or is NaN: no spread to test)
    form the top tie."""
    labels = list(scores)
    arrays = {label: np.asarray(scores[label], dtype=float) for label in labels}
    values = {label: float(arrays[label].mean() if percentile is None else np.percentile(arrays[label], percentile))
              for label in labels}
    sign = 1.0 if lower_is_better else -1.0
    order = sorted(labels, key=lambda label: sign * values[label])  # stable: equal values keep the given order
    best = arrays[order[0]]
    run_test = TESTS[test]
    if percentile is not None:
        p_values = [percentile_permutation_test(best, arrays[label], percentile, n_resamples, seed).p_value
                    for label in order[1:]]
    else:
        p_values = [(run_test(best, arrays[label], n_resamples, seed) if test == "randomization"
                     else run_test(best, arrays[label])).p_value for label in order[1:]]
    adjusted = adjust_p_values(np.array(p_values), correction)
    out = [VersusBest(order[0], values[order[0]], math.nan, math.nan, "best")]
    for label, p, q in zip(order[1:], p_values, adjusted):
        out.append(VersusBest(label, values[label], float(p), float(q), "worse" if q < alpha else "tied"))
    return out
