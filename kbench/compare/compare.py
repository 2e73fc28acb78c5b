"""Compare runs: metrics per config, the difference to a baseline and whether it is real.

    from kbench.compare import compare_runs
    cmp = compare_runs("<sweep parent run id>")                      # every finished config of a sweep
    cmp = compare_runs(["<run a>", "<run b>"], baseline="<run a>",   # or any runs, by id
                       metrics=["chunk_ndcg_at_10"], tracking_uri="sqlite:///experiments/mlflow.db")
    cmp.table                                                       # one row per config and metric

Per-query scores come from each run's ``per_query.parquet`` artifact (for a sweep child that reused an
equal config's run, from that run). Runs are paired by query id. For every config other than the baseline
and every metric: the mean difference with a bootstrap interval, the paired effect size (d_z), p-values of
the paired t-test, Wilcoxon signed-rank and randomization tests, and the chosen test's p-value corrected
for multiple comparisons over all (config, metric) pairs (Holm by default).

``cmp.ranking(metric)`` orders the configs by a metric (the headline metric by default: nDCG@10 of the
finest level, see ``headline_metric``), best first, and tests every other config against the best with the
same paired test and correction: a config whose difference to the best is not significant is "not told apart
from the best" (code ``tied``: the data cannot tell them apart; never "as good"), the others are "worse".

Directions: latency, cost and seconds are lower-is-better (``evaluation.directions``), so ``--metric
latency_ms_total`` ranks the fastest first and counts a config that is faster as better. A percentile of a
per-query column (``latency_ms_total_p95``) is a metric too: its value per config is that percentile, its
interval a bootstrap of it, and its test the paired permutation test of the percentile difference (the
chosen ``test`` applies to means only).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from kbench.tracking import tags as tag
from kbench.tracking.read import RunReadError, finished_sweep_children, get_run, read_per_query, tracking_client
from kbench.evaluation.directions import lower_is_better, percentile_of
from kbench.evaluation.significance import (TESTS, adjust_p_values, bootstrap_ci, minimum_detectable_difference,
                                            paired_effect_size, paired_t_test, percentile_difference_ci,
                                            percentile_permutation_test, randomization_test, rank_against_best,
                                            wilcoxon_signed_rank)
from kbench.errors import UserError

NOT_METRICS = ("query_id", "n_results")
DEFAULT_MEASURES = ("ndcg", "recall", "mrr")


class CompareError(UserError, ValueError):
    pass


@dataclass
class RunScores:
    label: str
    run_id: str
    per_query: pd.DataFrame  # indexed by query_id
    artifact_run_id: str  # where per_query.parquet was read (the source run of a reused config)
    knobs: str = ""
    summary: dict[str, float] = field(default_factory=dict)  # the run's logged metrics (costs, latency p95, ...)
    tags: dict[str, str] = field(default_factory=dict)  # the run's tags (its language census and warning, ...)
    params: dict[str, str] = field(default_factory=dict)  # its logged config, flattened (the dataset, the legs)


@dataclass
class Comparison:
    table: pd.DataFrame
    runs: list[RunScores]
    baseline: str
    metrics: list[str]
    test: str
    correction: str
    alpha: float
    confidence: float
    n_queries: int
    parent_run_id: str | None = None
    tracking_uri: str | None = None
    notes: list[str] = field(default_factory=list)
    n_resamples: int = 10_000
    seed: int = 0
    _rankings: dict[str, pd.DataFrame] = field(default_factory=dict, init=False, repr=False)

    @property
    def headline(self) -> str:
        """The metric configs are ranked on: the first compared metric (nDCG@10 of the finest level by default)."""
        return self.metrics[0]

    def scores(self, label: str, metric: str) -> np.ndarray:
        """The per-query values behind ``metric`` (for a percentile metric, the column it is a percentile of)."""
        run = next(r for r in self.runs if r.label == label)
        return run.per_query[metric_column(metric, run.per_query.columns)[0]].to_numpy(dtype=float)

    def significant(self) -> pd.DataFrame:
        return self.table[self.table["significant"]]

    def wide(self, value: str = "mean") -> pd.DataFrame:
        """One row per config, one column per metric (``value``: mean, diff, p_adjusted, ...)."""
        return self.table.pivot(index="config", columns="metric", values=value).loc[[r.label for r in self.runs]]

    def ranking(self, metric: str | None = None) -> pd.DataFrame:
        """Configs best first on ``metric`` (default: the headline), each tested against the best.

        Columns: rank, config, run_id, baseline, mean (for a percentile metric, the percentile), ci_low, ci_high,
        diff_to_best (value - the best's: <= 0, or >= 0 for a lower-is-better metric), p_vs_best (the
        comparison's test), p_vs_best_adjusted (its correction over the configs other than the best) and vs_best:
        ``best``, ``tied`` (not significantly different from the best at alpha) or ``worse``. Equal means keep
        the order of the runs (the baseline first)."""
        metric = metric or self.headline
        if metric not in self.metrics:
            raise CompareError(f"ranking: {metric!r} is not a compared metric; compared: {self.metrics}")
        if metric not in self._rankings:
            self._rankings[metric] = rank_configs(self, metric)
        return self._rankings[metric]

    @property
    def best(self) -> str:
        """The label of the config with the highest headline metric."""
        return str(self.ranking().iloc[0]["config"])


# --------------------------------------------------------------------------- reading runs
def load_runs(runs: str | list[str], tracking_uri: str | None = None,
              progress: Callable[[str], None] | None = None) -> tuple[list[RunScores], str | None, object]:
    """Run ids, or one sweep parent id -> per-query scores of each run (labels from the sweep tags); ``progress``
    gets a line per run read."""
    client = tracking_client(tracking_uri)
    ids = [runs] if isinstance(runs, str) else list(runs)
    if not ids:
        raise CompareError("give at least two run ids, or a sweep's parent run id")
    parent_id = None
    scores = []
    try:
        fetched = [get_run(client, run_id) for run_id in ids]
        if len(fetched) == 1 and fetched[0].data.tags.get(tag.SWEEP_ROLE) == "parent":
            parent_id = fetched[0].info.run_id
            fetched = finished_sweep_children(client, fetched[0])
        started = time.monotonic()
        for n, run in enumerate(fetched, start=1):
            label = run.data.tags.get(tag.SWEEP_LABEL) or run.data.tags.get("mlflow.runName") or run.info.run_id[:8]
            frame, source = read_per_query(client, run)
            if progress is not None:
                progress(f"  read {n}/{len(fetched)} runs' per-question scores ({label}; "
                         f"{time.monotonic() - started:.0f} s)")
            scores.append(RunScores(label, run.info.run_id, frame, source, run.data.tags.get(tag.SWEEP_KNOBS, ""),
                                    dict(run.data.metrics), dict(run.data.tags), dict(run.data.params)))
    except RunReadError as e:
        raise CompareError(str(e)) from None
    labels = [s.label for s in scores]
    for s in scores:  # two runs with one name: tell them apart by id
        if labels.count(s.label) > 1:
            s.label = f"{s.label} ({s.run_id[:8]})"
    return scores, parent_id, client


# --------------------------------------------------------------------------- comparing
def metrics_to_compare(names: Iterable[str]) -> list[str]:
    """Of these metric names: nDCG, recall and MRR at 10 (or the largest k) of the finest level present
    (chunk, else doc); empty when there are none."""
    cols = [c for c in names if c not in NOT_METRICS and "_at_budget_" not in c]  # a budget is no k
    for level in ("chunk", "doc"):
        ks = sorted({int(c.rsplit("_", 1)[1]) for c in cols
                     if c.startswith(f"{level}_") and "_at_" in c and c.rsplit("_", 1)[1].isdigit()})
        if ks:
            k = 10 if 10 in ks else ks[-1]
            found = [f"{level}_{m}_at_{k}" for m in DEFAULT_MEASURES if f"{level}_{m}_at_{k}" in cols]
            if found:
                return found
    return []


def headline_metric(names: Iterable[str]) -> str | None:
    """The one metric a run or sweep is judged by: nDCG@10 of the finest level (chunk, else doc), or the first
    of ``metrics_to_compare``; None when no such metric is there (a run's summary or per-query columns)."""
    found = metrics_to_compare(names)
    return found[0] if found else None


def default_metrics(frame: pd.DataFrame) -> list[str]:
    """nDCG, recall and MRR at 10 (or the largest k) of the finest level present: chunk, else doc."""
    found = metrics_to_compare(c for c in frame.columns if frame[c].dtype.kind in "fi")
    if not found:
        raise CompareError(f"no metric columns found in per_query.parquet (columns: {list(frame.columns)})")
    return found


def metric_column(metric: str, columns) -> tuple[str, float | None]:
    """The per-query column behind ``metric`` and the percentile taken of it: (``metric``, None) for a column
    itself, (``latency_ms_total``, 95) for ``latency_ms_total_p95`` when only the column is there."""
    found = percentile_of(metric)
    if metric not in columns and found is not None and found[0] in columns:
        return found
    return metric, None


def rank_configs(comparison: Comparison, metric: str) -> pd.DataFrame:
    """``Comparison.ranking``: configs by mean ``metric`` best first (lowest first for a latency or cost), each
    tested against the best (``evaluation.significance.rank_against_best``)."""
    rows = comparison.table[comparison.table["metric"] == metric].set_index("config")
    _, q = metric_column(metric, comparison.runs[0].per_query.columns)
    ranked = rank_against_best({label: comparison.scores(label, metric) for label in rows.index},
                               test=comparison.test, correction=comparison.correction, alpha=comparison.alpha,
                               n_resamples=comparison.n_resamples, seed=comparison.seed,
                               lower_is_better=lower_is_better(metric), percentile=q)
    rows = rows.loc[[r.label for r in ranked]].reset_index()
    return pd.DataFrame({
        "rank": np.arange(1, len(rows) + 1), "config": rows["config"], "run_id": rows["run_id"],
        "baseline": rows["baseline"], "mean": rows["mean"], "ci_low": rows["ci_low"], "ci_high": rows["ci_high"],
        "diff_to_best": rows["mean"] - rows.loc[0, "mean"], "p_vs_best": [r.p_value for r in ranked],
        "p_vs_best_adjusted": [r.p_adjusted for r in ranked], "vs_best": [r.verdict for r in ranked]})


def _pick_baseline(runs: list[RunScores], baseline: str | None) -> RunScores:
    if baseline is None:
        for r in runs:
            if r.knobs == "baseline":
                return r
        return runs[0]
    for r in runs:
        if baseline in (r.label, r.run_id, r.artifact_run_id):
            return r
    raise CompareError(f"baseline {baseline!r} is none of the compared runs; give a label or run id of: "
                       + ", ".join(f"{r.label} ({r.run_id})" for r in runs))


def compare_scores(runs: list[RunScores], *, baseline: str | None = None, metrics: list[str] | None = None,
                   test: str = "randomization", correction: str = "holm", alpha: float = 0.05,
                   confidence: float = 0.95, n_resamples: int = 10_000, n_bootstrap: int = 2_000,
                   seed: int = 0, progress: Callable[[str], None] | None = None) -> Comparison:
    if len(runs) < 2:
        raise CompareError(f"need at least two runs to compare, got {len(runs)}")
    if test not in TESTS:
        raise CompareError(f"test: unknown {test!r}; allowed: {', '.join(TESTS)}")
    base = _pick_baseline(runs, baseline)
    runs = [base] + [r for r in runs if r is not base]
    notes = []
    common = runs[0].per_query.index
    for r in runs[1:]:
        common = common.intersection(r.per_query.index)
    if len(common) < 2:
        raise CompareError("the runs share fewer than 2 query ids; were they run on the same dataset and sample?")
    for r in runs:
        if len(r.per_query) != len(common):
            notes.append(f"{r.label}: {len(r.per_query) - len(common)} queries not in every run were left out")
    metrics = metrics or default_metrics(base.per_query)
    for r in runs:
        missing = [m for m in metrics if metric_column(m, r.per_query.columns)[0] not in r.per_query]
        if missing:
            raise CompareError(f"{r.label}: per-query scores lack {missing}; available: "
                               f"{[c for c in r.per_query.columns if r.per_query[c].dtype.kind in 'fi']} "
                               "(and latency_ms_<stage>_p50/_p95 of each latency_ms_<stage>)")
    common = common.sort_values()
    for r in runs:
        r.per_query = r.per_query.loc[common]
    percentile = [m for m in metrics if metric_column(m, base.per_query.columns)[1] is not None]
    if percentile and test != "randomization":
        notes.append(f"{', '.join(percentile)}: a percentile, tested by the paired permutation test of its "
                     f"difference, not the {test} test")
    rows = []
    started = time.monotonic()
    for n, r in enumerate(runs, start=1):
        if progress is not None and r is not base:
            progress(f"  testing {n}/{len(runs)} configs against {base.label} on {len(metrics)} metrics ({r.label}; "
                     f"{time.monotonic() - started:.0f} s)")
        for metric in metrics:
            column, q = metric_column(metric, r.per_query.columns)
            b = r.per_query[column].to_numpy(dtype=float)
            a = base.per_query[column].to_numpy(dtype=float)
            low, high = bootstrap_ci(b, confidence, n_bootstrap, seed, q=q)
            row = {"config": r.label, "run_id": r.run_id, "metric": metric, "n_queries": len(b),
                   "mean": float(b.mean() if q is None else np.percentile(b, q)), "ci_low": low, "ci_high": high,
                   "baseline": r is base}
            d = b - a
            better = -d if lower_is_better(metric) else d
            if r is base:
                row.update(diff=0.0, diff_ci_low=0.0, diff_ci_high=0.0, effect_size=np.nan, p_t=np.nan,
                           p_wilcoxon=np.nan, p_randomization=np.nan, wins=0, ties=len(d), losses=0, mde=np.nan,
                           p_chosen=np.nan)
            elif q is not None:  # a percentile: no mean, so no t, Wilcoxon, effect size or MDE
                dlow, dhigh = percentile_difference_ci(a, b, q, confidence, n_bootstrap, seed)
                p = percentile_permutation_test(a, b, q, n_resamples, seed).p_value
                row.update(diff=row["mean"] - float(np.percentile(a, q)), diff_ci_low=dlow, diff_ci_high=dhigh,
                           effect_size=np.nan, p_t=np.nan, p_wilcoxon=np.nan, p_randomization=p,
                           wins=int((better > 0).sum()), ties=int((d == 0).sum()), losses=int((better < 0).sum()),
                           mde=np.nan, p_chosen=p)
            else:
                dlow, dhigh = bootstrap_ci(d, confidence, n_bootstrap, seed)
                row.update(diff=float(d.mean()), diff_ci_low=dlow, diff_ci_high=dhigh,
                           effect_size=paired_effect_size(a, b), p_t=paired_t_test(a, b).p_value,
                           p_wilcoxon=wilcoxon_signed_rank(a, b).p_value,
                           p_randomization=randomization_test(a, b, n_resamples, seed).p_value,
                           wins=int((better > 0).sum()), ties=int((d == 0).sum()), losses=int((better < 0).sum()),
                           mde=minimum_detectable_difference(float(d.std(ddof=1)), len(d), alpha))
                row["p_chosen"] = row[f"p_{test}"]
            rows.append(row)
    table = pd.DataFrame(rows)
    chosen = table.pop("p_chosen").to_numpy(dtype=float)
    table["p_adjusted"] = adjust_p_values(chosen, correction)
    table["significant"] = table["p_adjusted"] < alpha  # NaN (baseline, or no spread) compares False
    return Comparison(table, runs, base.label, list(metrics), test, correction, alpha, confidence, len(common),
                      notes=notes, n_resamples=n_resamples, seed=seed)


def compare_runs(runs: str | list[str], *, baseline: str | None = None, metrics: list[str] | None = None,
                 tracking_uri: str | None = None, test: str = "randomization", correction: str = "holm",
                 alpha: float = 0.05, confidence: float = 0.95, n_resamples: int = 10_000,
                 n_bootstrap: int = 2_000, seed: int = 0, progress: Callable[[str], None] | None = None) -> Comparison:
    """Compare MLflow runs (ids) or every finished config of a sweep (its parent run id); ``progress`` gets a line
    per run read and per config tested (``kbench compare`` prints them on stderr)."""
    scores, parent_id, client = load_runs(runs, tracking_uri, progress)
    comparison = compare_scores(scores, baseline=baseline, metrics=metrics, test=test, correction=correction,
                                alpha=alpha, confidence=confidence, n_resamples=n_resamples,
                                n_bootstrap=n_bootstrap, seed=seed, progress=progress)
    comparison.parent_run_id = parent_id
    comparison.tracking_uri = str(client.tracking_uri)
    return comparison


__all__ = ["Comparison", "CompareError", "RunScores", "compare_runs", "compare_scores", "default_metrics",
           "headline_metric", "load_runs", "metric_column", "metrics_to_compare", "paired_t_test",
           "randomization_test", "rank_configs", "wilcoxon_signed_rank"]


def detectable_differences(comparison: Comparison) -> pd.DataFrame:
    """Per metric, the minimum detectable difference at 80% power for the comparison's query count and alpha
    (paired t-test power): the median over the configs compared with the baseline (``mde``), and its range.
    A difference to the baseline smaller than this is one the query set will usually miss, real or not."""
    rows = []
    for metric in comparison.metrics:
        mde = comparison.table[(comparison.table["metric"] == metric) & ~comparison.table["baseline"]]["mde"]
        mde = mde.dropna()
        rows.append({"metric": metric, "n_queries": comparison.n_queries,
                     "mde": float(mde.median()) if len(mde) else np.nan,
                     "mde_min": float(mde.min()) if len(mde) else np.nan,
                     "mde_max": float(mde.max()) if len(mde) else np.nan})
    return pd.DataFrame(rows)
