"""A confirmation split: choose a sweep's best config on one set of queries, report its gain on another.

The best of twenty configs on one query set is partly the luckiest: its gain over the baseline, measured on
the queries that chose it, is biased upward (the winner's curse). Two ways to hold queries back:

- ``kbench sweep CONFIG --confirm-half`` (seeded by ``--confirm-seed``): the sweep's queries are split in two
  halves at random; the best config by mean on the *select* half (``winner`` here: the best by mean, which the
  winner's curse flatters, not the recommendation) has its difference to the baseline
  reported on the *confirm* half, with the comparison's paired test. Nothing runs twice.
- ``kbench sweep CONFIG --select-on train --confirm-on test``: the sweep runs on the ``select`` split
  (``dataset.split``); its best config and the baseline then run again on the ``confirm`` split's queries.

Either way the report shows both numbers: the gain where the best was chosen, and the gain where it was not.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from kbench.config import load_experiment
from kbench.evaluation.significance import TESTS, bootstrap_ci
from kbench.runner import run_experiment
from kbench.tracking import tags as tag
from kbench.tracking.mlflow_run import fill_run


@dataclass(frozen=True)
class Confirmation:
    metric: str
    baseline: str
    winner: str  # the best config on the select queries
    select_on: str  # "half 1 of 2 (seed 0)" or a split name
    confirm_on: str
    n_select: int
    n_confirm: int
    selected_diff: float  # winner - baseline on the select queries (what chose it)
    confirmed_diff: float  # winner - baseline on the confirm queries (the honest estimate)
    confirmed_ci: tuple[float, float]
    confirmed_p: float
    selected_mean: float
    confirmed_mean: float

    def metrics(self) -> dict[str, float]:
        """What the sweep's parent run gets: both gains, the held-back interval and p-value."""
        return {"confirm_selected_diff": self.selected_diff, "confirm_heldout_diff": self.confirmed_diff,
                "confirm_heldout_ci_low": self.confirmed_ci[0], "confirm_heldout_ci_high": self.confirmed_ci[1],
                "confirm_heldout_p": self.confirmed_p, "confirm_n_select": float(self.n_select),
                "confirm_n_heldout": float(self.n_confirm)}

    def lines(self) -> list[str]:
        low, high = self.confirmed_ci
        return [f"confirmation ({self.metric}): the best, {self.winner}, chosen on {self.select_on} "
                f"({self.n_select} queries), checked on {self.confirm_on} ({self.n_confirm} queries)",
                f"  gain over {self.baseline} where chosen: {self.selected_diff:+.4f} "
                f"(the best {self.selected_mean:.4f})",
                f"  gain over {self.baseline} held back:   {self.confirmed_diff:+.4f} [{low:+.4f}, {high:+.4f}] "
                f"p = {self.confirmed_p:.4g} (the best {self.confirmed_mean:.4f})"]


def paired_gain(a: np.ndarray, b: np.ndarray, test: str, seed: int) -> tuple[float, tuple[float, float], float]:
    """Mean of b - a, its bootstrap interval and the paired test's p-value (NaN below 2 queries)."""
    d = b - a
    if len(d) < 2:
        return float(d.mean()) if len(d) else np.nan, (np.nan, np.nan), np.nan
    fn = TESTS[test]
    p = fn(a, b, 10_000, seed).p_value if test == "randomization" else fn(a, b).p_value
    return float(d.mean()), bootstrap_ci(d, seed=seed), float(p)


def split_halves(query_ids: list[str], seed: int) -> tuple[list[str], list[str]]:
    """A seeded random half of the (sorted) query ids to select on, the rest to confirm on."""
    ordered = sorted(query_ids)
    order = np.random.default_rng(seed).permutation(len(ordered))
    half = len(ordered) // 2
    return [ordered[i] for i in sorted(order[:half])], [ordered[i] for i in sorted(order[half:])]


def confirm_on_half(scores: dict[str, pd.Series], baseline: str, metric: str, *, seed: int = 0,
                    test: str = "randomization") -> Confirmation:
    """``scores``: per config label, its per-query ``metric`` indexed by query id (the same queries each)."""
    common = sorted(set.intersection(*(set(s.index) for s in scores.values())))
    if len(common) < 4:
        raise ValueError(f"a confirmation half needs at least 4 shared queries, got {len(common)}")
    select, confirm = split_halves(common, seed)
    means = {label: float(s.loc[select].mean()) for label, s in scores.items()}
    winner = max(scores, key=lambda label: means[label])  # first of equal means: the order given
    base, best = scores[baseline], scores[winner]
    confirmed, ci, p = paired_gain(base.loc[confirm].to_numpy(float), best.loc[confirm].to_numpy(float), test, seed)
    return Confirmation(metric, baseline, winner, f"a seeded half (seed {seed})", "the other half", len(select),
                        len(confirm), means[winner] - means[baseline], confirmed, ci, p, means[winner],
                        float(best.loc[confirm].mean()))


def confirm_on_split(selected: dict[str, pd.Series], confirm: dict[str, pd.Series], baseline: str, winner: str,
                     metric: str, select_on: str, confirm_on: str, *, seed: int = 0,
                     test: str = "randomization") -> Confirmation:
    """The winner chosen on the ``select_on`` split's scores, its gain measured on the ``confirm_on`` split's
    (``confirm`` holds the baseline's and the winner's per-query scores there)."""
    common = sorted(set(confirm[baseline].index) & set(confirm[winner].index))
    seen = set(selected[baseline].index) & set(common)
    if common and len(seen) == len(common):
        raise ValueError(f"split {confirm_on!r} has the same queries as split {select_on!r}: this dataset's "
                         "queries do not depend on dataset.split (span datasets have one set); use --confirm-half")
    if seen:
        common = [q for q in common if q not in seen]  # a query the selection saw confirms nothing
    a, b = confirm[baseline].loc[common].to_numpy(float), confirm[winner].loc[common].to_numpy(float)
    confirmed, ci, p = paired_gain(a, b, test, seed)
    sel_common = sorted(set(selected[baseline].index) & set(selected[winner].index))
    selected_diff = float(selected[winner].loc[sel_common].mean() - selected[baseline].loc[sel_common].mean())
    return Confirmation(metric, baseline, winner, f"split {select_on}", f"split {confirm_on}", len(sel_common),
                        len(common), selected_diff, confirmed, ci, p, float(selected[winner].loc[sel_common].mean()),
                        float(b.mean()) if len(b) else np.nan)


def confirm_sweep(outcome, plan, *, half_seed: int | None = None, select_on: str | None = None,
                  confirm_on: str | None = None, say=print) -> Confirmation | None:
    """The confirmation of a finished sweep (``outcome.comparison`` compared its configs): on a seeded half
    of its queries, or by running the winner and the baseline again on the ``confirm_on`` split. None when
    fewer than two configs finished."""
    comparison = outcome.comparison
    if comparison is None:
        return None
    metric = comparison.headline
    scores = {r.label: r.per_query[metric] for r in comparison.runs}
    if confirm_on is None:
        return confirm_on_half(scores, comparison.baseline, metric, seed=half_seed or 0, test=comparison.test)
    by_label = plan.by_label()
    winner = comparison.best
    confirm: dict[str, pd.Series] = {}
    for label in dict.fromkeys([comparison.baseline, winner]):
        data = by_label[label].experiment.resolved()
        data["dataset"]["split"] = confirm_on
        say(f"  confirming on split {confirm_on}: {label}")
        result = run_experiment(load_experiment(data), progress=False, log=False)
        if metric not in result.per_query:
            raise ValueError(f"the run on split {confirm_on!r} has no {metric!r} column")
        confirm[label] = result.per_query.set_index("query_id")[metric]
    return confirm_on_split(scores, confirm, comparison.baseline, winner, metric, select_on or "(the sweep's)",
                            confirm_on, seed=comparison.seed, test=comparison.test)


def record_confirmation(outcome, confirmation: Confirmation) -> None:
    """Put the confirmation on the sweep's parent run (metrics ``confirm_*``, tag ``kbench.sweep.confirmed``)
    and, when the sweep wrote a report, append it to report.md and log that file again."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(outcome.tracking_uri)
    fill_run(client, outcome.parent_run_id, params={}, metrics=confirmation.metrics(), run_dir=None,
             tags={tag.SWEEP_CONFIRMED: f"{confirmation.winner} on {confirmation.confirm_on}"})
    if outcome.report_dir is not None and (outcome.report_dir / "report.md").exists():
        report = outcome.report_dir / "report.md"
        text = report.read_text(encoding="utf-8")
        section = "\n".join(["", "## Confirmation on held-back queries", "", *confirmation.lines(), ""])
        report.write_text(text.split("\n## Confirmation on held-back queries")[0] + section, encoding="utf-8")
        client.log_artifact(outcome.parent_run_id, str(report), "report")
