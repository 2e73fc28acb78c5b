"""A grid sweep's factor effects: which axis moves the headline metric, and which axes interact.

    effects, note = grid_effects(plan, comparison)   # [] and a reason when the sweep is no complete grid
    log_effects(client, parent_run_id, effects, metric, folder)

The statistics are ``kbench.evaluation.effects`` (pure, on per-query arrays); this module only maps a sweep's
grid points to factor levels (``expand.grid_factors``) and the compared configs' per-query scores to them.
Variants are no grid points and take no part. A grid point that resolved to the same config as another
(an alias) has that config's scores.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from kbench.evaluation.effects import Effect, IncompleteGridError, factor_effects
from kbench.sweep.expand import SweepPlan, grid_factors
from kbench.tracking.mlflow_run import fill_run


def grid_effects(plan: SweepPlan, comparison, metric: str | None = None) -> tuple[list[Effect], str]:
    """Effects on ``metric`` (default: the comparison's headline) of the sweep's grid axes; with a reason
    (empty when computed) when there are none."""
    sweep = plan.raw_blocks.get("sweep") or {}
    if comparison is None:
        return [], "fewer than two configs finished"
    metric = metric or comparison.headline
    levels, factors = grid_factors(sweep)
    if len([f for f, v in factors.items() if len(v) >= 2]) < 1:
        return [], "no grid axis with two or more values"
    label_of = {c.label: c.label for c in plan.configs}
    label_of.update({alias: c.label for c in plan.configs for alias in c.aliases})
    finished = {run.label: run.per_query[metric].to_numpy(dtype=float) for run in comparison.runs}
    scores = {point: finished[label_of[point]] for point in levels if label_of.get(point) in finished}
    try:
        return factor_effects(scores, {p: levels[p] for p in scores}, factors, confidence=comparison.confidence,
                              seed=comparison.seed), ""
    except IncompleteGridError as e:
        return [], str(e)


def metric_name(effect: Effect) -> str:
    """An MLflow metric name for a main effect or an interaction: ``effect_main.chunk_size.300_to_600``."""
    text = f"effect_{effect.kind}.{effect.factor}.{effect.change}".replace(" -> ", "_to_").replace(" x ", "_x_")
    return re.sub(r"[^A-Za-z0-9_.\-/]", "_", text)[:250]


def effect_metrics(effects: list[Effect]) -> dict[str, float]:
    """Main effects and interactions as MLflow metrics (the simple effects are in the artifact)."""
    return {metric_name(e): e.mean for e in effects if e.kind in ("main", "interaction") and np.isfinite(e.mean)}


def effects_markdown(effects: list[Effect], metric: str) -> str:
    rows = ["| kind | factor | change | at | mean | 95% interval | p (paired t) |", "|---|---|---|---|---|---|---|"]
    for e in effects:
        p = "n/a" if np.isnan(e.p_value) else f"{e.p_value:.3g}"
        rows.append(f"| {e.kind} | {e.factor} | {e.change} | {e.at} | {e.mean:+.4f} | "
                    f"[{e.ci_low:+.4f}, {e.ci_high:+.4f}] | {p} |")
    return "\n".join([f"## Factor effects on {metric}", "",
                      "Each factor's change from its first level, averaged over the other factors (main); one "
                      "factor's change at a fixed level of another (simple); and how much that change differs "
                      "between the two levels (interaction: 0 means the factors add up). Intervals and p-values "
                      "from the per-question differences.", "", *rows, ""])


def log_effects(client, parent_run_id: str, effects: list[Effect], metric: str, folder: Path) -> Path:
    """``factor_effects.json`` and ``factor_effects.md`` in ``folder``, logged as artifacts of the parent run, and
    the main effects and interactions as its metrics."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "factor_effects.json").write_text(json.dumps({"metric": metric, "effects": [e.row() for e in effects]},
                                                           indent=2), encoding="utf-8")
    (folder / "factor_effects.md").write_text(effects_markdown(effects, metric), encoding="utf-8")
    for name in ("factor_effects.json", "factor_effects.md"):
        client.log_artifact(parent_run_id, str(folder / name))
    metrics = effect_metrics(effects)
    if metrics:
        fill_run(client, parent_run_id, params={}, metrics=metrics, run_dir=None)
    return folder / "factor_effects.md"
