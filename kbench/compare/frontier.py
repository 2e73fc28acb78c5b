"""Quality against cost: the Pareto frontier of configs, and the best config under constraints.

    points = run_points(comparison.runs, ["chunk_ndcg_at_10", "latency_ms_total_p95"])  # one row per config
    frontier = pareto_frontier(points, "chunk_ndcg_at_10", "latency_ms_total_p95")
    best = best_under(points, "chunk_ndcg_at_10", [parse_constraint("latency_ms_total_p95<50")])

A config is on the frontier when no other config is at least as good on the metric *and* at most as costly,
and strictly better on one of the two (higher metric, lower cost). Two configs with equal metric and cost
are both on it. The cost is any run metric: ``latency_ms_<stage>_p50/p95``, ``cost_index_bytes``,
``cost_embed_seconds``, ``llm_total_cost_usd``, ``time_s_<stage>``, ``count_chunks``.
"""
from __future__ import annotations

import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from kbench.errors import UserError

OPERATORS = {"<=": operator.le, ">=": operator.ge, "<": operator.lt, ">": operator.gt}


class FrontierError(UserError, ValueError):
    pass


@dataclass(frozen=True)
class Constraint:
    metric: str
    op: str
    bound: float

    def holds(self, value: float) -> bool:
        return bool(np.isfinite(value)) and OPERATORS[self.op](value, self.bound)

    def __str__(self) -> str:
        return f"{self.metric}{self.op}{self.bound:g}"


def parse_constraint(text: str) -> Constraint:
    """``'latency_ms_total_p95<50'`` -> Constraint; operators <, <=, >, >=."""
    m = re.fullmatch(r"\s*([\w.-]+)\s*(<=|>=|<|>)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*", text)
    if not m:
        raise FrontierError(f"--constraint {text!r}: write METRIC<BOUND, e.g. 'latency_ms_total_p95<50' "
                            "(operators <, <=, >, >=)")
    return Constraint(m.group(1), m.group(2), float(m.group(3)))


def run_points(runs, names: Sequence[str]) -> pd.DataFrame:
    """One row per run (``config`` = its label): the run-level value of each of ``names`` (its logged
    metric; a per-query metric missing from the run's metrics is the mean of its per-query column)."""
    rows = []
    for r in runs:
        row = {"config": r.label, "run_id": r.run_id}
        for name in names:
            if name in r.summary:
                row[name] = float(r.summary[name])
            elif name in r.per_query and r.per_query[name].dtype.kind in "fi":
                row[name] = float(r.per_query[name].mean())
            else:
                known = sorted(k for k in r.summary if k.startswith(("latency_ms_", "cost_", "time_s_", "llm_total_")))
                raise FrontierError(f"{r.label}: no run metric {name!r}; costs logged: {', '.join(known) or 'none'}")
        rows.append(row)
    return pd.DataFrame(rows)


def pareto_frontier(points: pd.DataFrame, metric: str, cost: str) -> pd.DataFrame:
    """``points`` with a boolean column ``on_frontier``, sorted by cost (then metric, best first)."""
    values, costs = points[metric].to_numpy(dtype=float), points[cost].to_numpy(dtype=float)
    on = []
    for i in range(len(points)):
        dominated = ((values >= values[i]) & (costs <= costs[i]) & ((values > values[i]) | (costs < costs[i])))
        on.append(bool(np.isfinite(values[i]) and np.isfinite(costs[i]) and not dominated.any()))
    out = points.assign(on_frontier=on)
    return out.sort_values([cost, metric], ascending=[True, False], kind="stable").reset_index(drop=True)


def best_under(points: pd.DataFrame, metric: str, constraints: Sequence[Constraint]) -> pd.Series | None:
    """The config with the highest ``metric`` among those meeting every constraint (None if none does);
    equal metrics keep the order of ``points``."""
    ok = np.ones(len(points), dtype=bool)
    for c in constraints:
        if c.metric not in points:
            raise FrontierError(f"--constraint {c}: {c.metric!r} is not among the columns {list(points.columns)}")
        ok &= np.array([c.holds(v) for v in points[c.metric].to_numpy(dtype=float)])
    kept = points[ok]
    if kept.empty:
        return None
    return kept.loc[kept[metric].astype(float).idxmax()]


def plot_frontier(frontier: pd.DataFrame, metric: str, cost: str, path: Path) -> Path:
    """Every config as a point, the frontier as a step line, labelled."""
    from matplotlib.figure import Figure  # not pyplot: a notebook calling this keeps its own backend

    fig = Figure(figsize=(7, 4.5))
    ax = fig.subplots()
    off = frontier[~frontier["on_frontier"]]
    on = frontier[frontier["on_frontier"]]
    ax.scatter(off[cost], off[metric], color="#999", label="dominated")
    ax.step(on[cost], on[metric], where="post", color="#c0392b", marker="o", label="frontier")
    for r in frontier.itertuples():
        ax.annotate(str(r.config)[:30], (getattr(r, cost), getattr(r, metric)), fontsize=7,
                    xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel(cost)
    ax.set_ylabel(metric)
    ax.set_title(f"{metric} against {cost}")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path
