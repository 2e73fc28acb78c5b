"""One recommendation from a set of configs: a config in the top tie on every metric that matters, the
cheapest of those; or, when no config is in every tie, which metrics disagree and why.

    from kbench.evaluation.recommend import ConfigRecord, RecommendConfig, recommend
    records = [ConfigRecord("fixed", per_query={"chunk_ndcg_at_10": array, "latency_ms_total": array, ...},
                            values={"cost_index_bytes": 1.5e6}), ...]
    found = recommend(records, headline="chunk_ndcg_at_10", config=RecommendConfig())
    found.config      # the recommended label, or None when no config is in every tie
    found.tie         # every config in the top tie on every metric (the recommended one among them)
    found.reason      # why, in one sentence
    found.lines()     # "recommendation: ..." and one or two lines saying why

This is a plain function over plain records, so every way of searching configs (a grid sweep, ``kbench
compare``, a racing search) ends with the same recommendation from the same numbers. The rule:

1. **Metrics**: the headline (what configs are ranked on, nDCG@10 of the finest level) and every guard of
   ``recommend.guards`` (default: doc and chunk nDCG@10, recall@10 of the headline's level, p95 latency of the
   whole search). A guard without a level (``recall_at_10``) takes the headline's (``chunk_recall_at_10``).
   A guard the records do not measure (chunk metrics on a set with document labels only) is left out, and
   the lines say so.
2. **The top tie on a quality metric** (higher is better): the best config by mean and every config not
   significantly worse than it, exactly as ``kbench compare`` ranks them
   (``significance.rank_against_best``: the paired test, corrected over the configs, at alpha).
3. **The top tie on a latency percentile** (``latency_ms_<stage>_p95``, lower is better, from the per-query
   ``latency_ms_<stage>`` column): the fastest config and every config whose paired bootstrap interval over
   queries of (its p95 - the fastest's p95) reaches ``recommend.latency_tolerance_ms`` (default 1 ms), at
   confidence 1 - alpha / (configs - 1) (Bonferroni, as the quality ties are corrected over the configs). The
   tolerance is there because a difference can be real and still no reason to choose: BM25 at 0.14 ms against
   a hybrid at 0.60 ms is significant over 150 questions and irrelevant to a user.
4. **Recommended**: of the configs in the top tie on every metric, the cheapest: lowest ``recommend.cost``
   (default ``cost_index_bytes``: the bytes of the run's chunk vectors, which grows with the chunks embedded
   and their dimension, is 0 without a vector leg, and is the same on every machine and with a warm cache,
   unlike embedding seconds (0 on a cache hit) or latency (the machine's load)); equal costs go to the lower
   p95 latency, then to the better headline mean.
5. **No config in every tie**: the lines name the metric whose tie shares no config with the ties before it
   (headline first, then the guards in order), with the best value among those configs against the tie's, and
   the closest config (in the most ties).
"""
from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from pydantic import Field, field_validator

from kbench.evaluation.significance import rank_against_best
from kbench.registry import StrictModel

DEFAULT_GUARDS = ["doc_ndcg_at_10", "chunk_ndcg_at_10", "recall_at_10", "latency_ms_total_p95"]
DEFAULT_COST = "cost_index_bytes"
LEVELS = ("chunk", "doc", "span")
LATENCY = re.compile(r"^latency_ms_(?P<stage>\w+?)_p(?P<q>\d{1,2})$")
METRIC_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


class RecommendConfig(StrictModel):
    """Section ``recommend``: what the end of a sweep (and ``kbench compare``) recommends by. It changes no
    result, so it is not part of the run key."""

    guards: list[str] = Field(default_factory=lambda: list(DEFAULT_GUARDS),
                              description="metrics a recommended config must also be in the top tie on, beside the "
                                          "headline: per-query metric names (chunk_recall_at_10; recall_at_10 takes "
                                          "the headline's level) or latency_ms_<stage>_p95 (lower is better)")
    cost: str = Field(DEFAULT_COST, description="the run metric that picks the cheapest config inside the tie "
                                                "(lower is cheaper): cost_index_bytes, cost_embed_seconds, "
                                                "latency_ms_total_p95, llm_total_cost_usd, ...")

    latency_tolerance_ms: float = Field(1.0, ge=0, description="a latency difference a user would not notice: a "
                                        "config whose p95 may be within this many ms of the fastest's is in the "
                                        "latency tie")

    @field_validator("guards")
    @classmethod
    def _metric_names(cls, guards: list[str]) -> list[str]:
        bad = [g for g in guards if not METRIC_NAME.match(g)]
        if bad:
            raise ValueError(f"not metric names: {bad}; use names as runs log them, e.g. chunk_ndcg_at_10, "
                             "recall_at_10, latency_ms_total_p95")
        return guards

    @field_validator("cost")
    @classmethod
    def _cost_name(cls, cost: str) -> str:
        if not METRIC_NAME.match(cost):
            raise ValueError(f"not a metric name: {cost!r}; e.g. cost_index_bytes, cost_embed_seconds")
        return cost


@dataclass(frozen=True)
class ConfigRecord:
    """One config as the recommendation sees it. ``per_query``: a column name -> one value per question, the
    same questions in the same order in every record. ``values``: run-level numbers (costs, logged p95s)."""

    label: str
    per_query: Mapping[str, np.ndarray]
    values: Mapping[str, float] = field(default_factory=dict)


@dataclass
class MetricTie:
    metric: str
    lower_is_better: bool
    values: dict[str, float]  # label -> the mean (or percentile)
    tie: list[str]  # best first
    best: str
    tolerance: float = 0.0  # latency: a difference within it ties (ms)

    def show(self, value: float) -> str:
        return f"{value:.2f} ms" if self.lower_is_better else f"{value:.4f}"


@dataclass
class Recommendation:
    config: str | None
    headline: str
    metrics: list[str]  # the metrics every tie was taken on, headline first
    ties: dict[str, MetricTie]
    in_every_tie: list[str]  # in the headline's ranking order
    cost: str
    costs: dict[str, float]  # label -> cost (NaN: not logged)
    latency: dict[str, float] = field(default_factory=dict)  # label -> p95 latency, ms (the second price)
    left_out: dict[str, str] = field(default_factory=dict)  # a guard -> why it was left out
    closest: str | None = None  # with no config in every tie: the config in the most ties
    conflict: str | None = None  # the metric whose tie shares no config with those before it

    @property
    def tie(self) -> list[str]:
        """The configs in the top tie on every metric (the recommended one among them), headline order."""
        return list(self.in_every_tie)

    @property
    def reason(self) -> str:
        """Why, in one sentence: the recommendation line without its prefix; with none, which metrics disagree."""
        verdict = self._verdict().removeprefix("recommendation: ")
        if self.config is not None or self.conflict is None:
            return verdict
        return f"{verdict}: {self._why()[0].strip().removeprefix('they disagree: ')}"

    def lines(self) -> list[str]:
        out = [self._verdict()] + self._why()
        if self.left_out:
            out.append("  left out: " + "; ".join(f"{m} ({why})" for m, why in self.left_out.items()))
        return out

    def _verdict(self) -> str:
        names = ", ".join(self.metrics)
        if self.config is not None:
            n = len(self.in_every_tie)
            if n == 1:
                return f"recommendation: {self.config} (the only config in the top tie on every metric: {names})"
            cost = self.costs.get(self.config, math.nan)
            same = [c for c in self.in_every_tie if _same(self.costs.get(c, math.nan), cost)]
            why = f"{self.cost} {_number(cost)}"
            if len(same) > 1:
                why += f", as low for {len(same)} of them; then p95 latency {self._latency(self.config)}"
            return (f"recommendation: {self.config} (in the top tie on every metric: {names}; the cheapest of "
                    f"{n} such configs: {why})")
        return f"recommendation: none: no config is in the top tie on every metric ({names})"

    def _why(self) -> list[str]:
        if self.config is not None:
            others = [c for c in self.in_every_tie if c != self.config]
            if not others:
                return []
            return ["  also in every tie: " + ", ".join(
                f"{c} ({self.cost} {_number(self.costs.get(c, math.nan))}, p95 {self._latency(c)})"
                for c in others[:4]) + (" ..." if len(others) > 4 else "")]
        tie = self.ties[self.conflict]
        before = self.metrics[:self.metrics.index(self.conflict)]
        common = [c for c in self.ties[self.headline].tie if all(c in self.ties[m].tie for m in before)]
        best_common = (min if tie.lower_is_better else max)(common, key=lambda c: tie.values[c])
        shown = ", ".join(tie.tie[:3]) + (" ..." if len(tie.tie) > 3 else "")
        line = (f"  they disagree: the configs in the top tie on {', '.join(before)} ({', '.join(common[:3])}"
                f"{' ...' if len(common) > 3 else ''}) are not in the top tie on {self.conflict} ({shown}): "
                f"{self.conflict} {tie.show(tie.values[best_common])} at best ({best_common}) against "
                f"{tie.show(tie.values[tie.best])} ({tie.best})"
                + (f", beyond the {tie.tolerance:g} ms tolerance" if tie.lower_is_better else ""))
        missing = [m for m in self.metrics if self.closest not in self.ties[m].tie]
        return [line, f"  closest: {self.closest}, in the top tie on {len(self.metrics) - len(missing)} of "
                      f"{len(self.metrics)} (not {', '.join(missing)}); to choose it, drop those from "
                      "recommend.guards"]

    def _latency(self, label: str) -> str:
        value = self.latency.get(label, math.nan)
        return "not logged" if math.isnan(value) else f"{value:.2f} ms"

    def as_dict(self) -> dict:
        return {"config": self.config, "headline": self.headline, "metrics": self.metrics,
                "ties": {m: t.tie for m, t in self.ties.items()}, "in_every_tie": self.in_every_tie,
                "cost": self.cost, "costs": self.costs, "left_out": self.left_out, "closest": self.closest,
                "conflict": self.conflict, "lines": self.lines()}


def _same(x: float, y: float) -> bool:
    return (math.isnan(x) and math.isnan(y)) or x == y


def _number(x: float) -> str:
    if math.isnan(x):
        return "not logged"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.4g}"


def resolve_metrics(headline: str, guards: list[str]) -> list[str]:
    """The headline, then each guard with the headline's level put in front of a level-less name; no repeats."""
    level = headline.split("_", 1)[0] if headline.split("_", 1)[0] in LEVELS else None
    out = [headline]
    for guard in guards:
        name = guard
        if level and not LATENCY.match(guard) and guard.split("_", 1)[0] not in LEVELS:
            name = f"{level}_{guard}"
        if name not in out:
            out.append(name)
    return out


def quality_tie(metric: str, records: list[ConfigRecord], *, test: str, correction: str, alpha: float,
                n_resamples: int, seed: int) -> MetricTie:
    ranked = rank_against_best({r.label: r.per_query[metric] for r in records}, test=test, correction=correction,
                               alpha=alpha, n_resamples=n_resamples, seed=seed)
    return MetricTie(metric, False, {v.label: v.mean for v in ranked},
                     [v.label for v in ranked if v.verdict != "worse"], ranked[0].label)


def latency_tie(metric: str, column: str, q: float, records: list[ConfigRecord], *, alpha: float,
                n_bootstrap: int, seed: int, tolerance_ms: float = 0.0) -> MetricTie:
    """The fastest config on the ``q``-th percentile of ``column`` and every config whose paired bootstrap
    interval of the percentile's difference to it (Bonferroni over the others) reaches ``tolerance_ms``."""
    arrays = {r.label: np.asarray(r.per_query[column], dtype=float) for r in records}
    values = {label: float(np.percentile(a, q)) for label, a in arrays.items()}
    order = sorted(values, key=lambda label: values[label])  # stable: equal values keep the given order
    fastest = arrays[order[0]]
    n = len(fastest)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_bootstrap, n))  # one set of resamples, the same for every config (paired)
    base = np.percentile(fastest[idx], q, axis=1)
    level = 1 - alpha / max(len(order) - 1, 1)
    tie = [order[0]]
    for label in order[1:]:
        differences = np.percentile(arrays[label][idx], q, axis=1) - base
        low = float(np.percentile(differences, 100 * (1 - level) / 2))
        if low <= tolerance_ms:
            tie.append(label)
    return MetricTie(metric, True, values, tie, order[0], tolerance_ms)


def _p95(record: ConfigRecord) -> float:
    """The whole search's p95 latency in ms: from the per-query column when there, else the logged metric."""
    if "latency_ms_total" in record.per_query:
        return float(np.percentile(np.asarray(record.per_query["latency_ms_total"], dtype=float), 95))
    return float(record.values.get("latency_ms_total_p95", math.nan))


def recommend(records: list[ConfigRecord], headline: str, config: RecommendConfig | None = None, *,
              test: str = "randomization", correction: str = "holm", alpha: float = 0.05,
              n_resamples: int = 10_000, n_bootstrap: int = 2_000, seed: int = 0) -> Recommendation:
    """The recommendation over ``records`` (two or more configs, each with the same questions in the same
    order; test, correction and alpha as the comparison that ranked them; ``config``: the guards and the cost,
    default ``RecommendConfig()``). Returns a plain record: ``.config`` (the label, or None), ``.tie`` (every
    config in the top tie on every metric), ``.reason`` (one sentence), ``.lines()`` (what commands print)."""
    config = config or RecommendConfig()
    if len(records) < 2:
        raise ValueError(f"a recommendation compares at least 2 configs, got {len(records)}")
    if headline not in records[0].per_query:
        raise ValueError(f"the headline metric {headline!r} has no per-query scores")
    metrics, left_out, ties = [], {}, {}
    for metric in resolve_metrics(headline, config.guards):
        latency = LATENCY.match(metric)
        column = f"latency_ms_{latency['stage']}" if latency else metric
        missing = [r.label for r in records if column not in r.per_query]
        if missing:
            left_out[metric] = ("not measured by these runs" if len(missing) == len(records)
                                else f"not measured by {', '.join(missing[:3])}")
            continue
        if latency:
            ties[metric] = latency_tie(metric, column, float(latency["q"]), records, alpha=alpha,
                                       n_bootstrap=n_bootstrap, seed=seed,
                                       tolerance_ms=config.latency_tolerance_ms)
        else:
            ties[metric] = quality_tie(metric, records, test=test, correction=correction, alpha=alpha,
                                       n_resamples=n_resamples, seed=seed)
        metrics.append(metric)
    costs = {r.label: float(r.values.get(config.cost, math.nan)) for r in records}
    latency = {r.label: _p95(r) for r in records}
    order = ties[headline].tie + [r.label for r in records if r.label not in ties[headline].tie]
    in_every = [c for c in order if all(c in ties[m].tie for m in metrics)]
    found = Recommendation(None, headline, metrics, ties, in_every, config.cost, costs, latency, left_out)
    if all(math.isnan(c) for c in costs.values()):
        found.left_out[config.cost] = "not logged by these runs: the cheapest is picked by p95 latency"
    if in_every:
        rank = {label: i for i, label in enumerate(order)}

        def price(label: str) -> tuple:  # NaN (not logged) prices last
            return tuple(math.inf if math.isnan(x) else x for x in (costs[label], latency[label])) + (rank[label],)

        found.config = min(in_every, key=price)
        return found
    narrowed = list(ties[headline].tie)
    for metric in metrics[1:]:
        if not [c for c in narrowed if c in ties[metric].tie]:
            found.conflict = metric
            break
        narrowed = [c for c in narrowed if c in ties[metric].tie]
    in_ties = {label: sum(label in ties[m].tie for m in metrics) for label in order}
    found.closest = max(order, key=lambda label: in_ties[label])  # max keeps the first of equal counts
    return found
