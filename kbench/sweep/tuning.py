"""Tuned fusion: choose a fusion weight, RRF k or normalization on a tuning split, report it on the other only.

    tuned = tune(candidates, score, tune_ids, report_ids)       # pure: score(candidate, question ids) -> array
    tuned.best, tuned.tuning_mean, tuned.report_scores          # chosen on tune_ids, measured on report_ids
    tuned = tune_fusion(experiment, {"weight": [0.0, 0.1, ..., 1.0]}, seed=0)   # a real config, one corpus

A value chosen as the best of many on some questions is flattered on those questions (the winner's curse), so
the figure reported for a tuned fusion comes only from questions the tuning never scored: ``tune`` calls
``score`` with the tuning questions for every candidate, then once with the report questions for the one
chosen (tests/sweep/test_tuning.py holds it to that with a scorer that records what it was asked).

The choice is ranx's (``ranx.optimize_fusion``): every candidate in order, the highest mean on the tuning
questions wins, and a later candidate with an equal mean replaces an earlier one (ranx compares with ``>=``).
With the same candidates, runs and metric the tuned weight and its score are ranx's
(tests/sweep/test_tuning.py: ranx parity on the demo set's real vector and BM25 lists).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np
from pydantic import ValidationError

from kbench.config import Experiment
from kbench.errors import ConfigError, format_error
from kbench.evaluation.significance import bootstrap_ci
from kbench.compare import headline_metric
from kbench.pipeline import evaluate_run, prepare_corpus, search_corpus
from kbench.retrieval.stage import build_legs, leg_contexts
from kbench.sweep.confirm import split_halves

TUNABLE = ("weight", "k", "normalization", "weights")  # fusion knobs a range may be given for


@dataclass
class Tuned:
    best: Any  # the chosen candidate
    tuning_mean: float  # its mean on the tuning questions (flattered: it was chosen there)
    report_scores: np.ndarray  # its per-question scores on the report questions only
    tune_ids: list[str]
    report_ids: list[str]
    trials: list[tuple[Any, float]] = field(default_factory=list)  # every candidate with its tuning mean

    metric: str = ""

    @property
    def report_mean(self) -> float:
        return float(self.report_scores.mean()) if len(self.report_scores) else float("nan")

    def lines(self) -> list[str]:
        chosen = ", ".join(f"retrieval.fusion.{k}={v}" for k, v in self.best.items()) \
            if isinstance(self.best, dict) else str(self.best)
        low, high = bootstrap_ci(self.report_scores) if len(self.report_scores) else (np.nan, np.nan)
        out = [f"tuned {chosen} on {len(self.tune_ids)} questions (a seeded half); {self.metric} there "
               f"{self.tuning_mean:.4f} (flattered: chosen there)",
               f"  on the other {len(self.report_ids)} questions, never seen by the tuning: {self.metric} "
               f"{self.report_mean:.4f} [{low:.4f}, {high:.4f}] (the figure to report)",
               "  every candidate on the tuning questions:"]
        out += [f"    {c}: {m:.4f}" for c, m in self.trials]
        return out


def tune(candidates: list[Any], score: Callable[[Any, list[str]], np.ndarray], tune_ids: list[str],
         report_ids: list[str]) -> Tuned:
    """The candidate with the best mean ``score`` on ``tune_ids`` (ties: the later, as ranx), and its scores on
    ``report_ids``. The two splits must not share a question."""
    shared = set(tune_ids) & set(report_ids)
    if shared:
        raise ValueError(f"tuning and report splits share {len(shared)} questions; a tuned value is reported only "
                         "on questions it was not tuned on")
    if not candidates:
        raise ValueError("tune: no candidate values")
    if len(tune_ids) < 1 or len(report_ids) < 1:
        raise ValueError(f"tune: need questions in both splits, got {len(tune_ids)} and {len(report_ids)}")
    trials, best, best_mean = [], None, -np.inf
    for candidate in candidates:
        mean = float(np.mean(score(candidate, list(tune_ids))))
        trials.append((candidate, mean))
        if mean >= best_mean:  # ranx's rule: an equal later candidate wins
            best, best_mean = candidate, mean
    report = np.asarray(score(best, list(report_ids)), dtype=float)
    return Tuned(best, best_mean, report, list(tune_ids), list(report_ids), trials)


def fusion_candidates(ranges: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Every combination of the given fusion knobs' values, as ``retrieval.fusion`` updates."""
    unknown = [k for k in ranges if k not in TUNABLE]
    if unknown:
        raise ValueError(f"tune: {unknown} are no tunable fusion knobs; allowed: {', '.join(TUNABLE)}")
    for knob, values in ranges.items():
        if not isinstance(values, list) or not values:
            raise ValueError(f"tune: give retrieval.fusion.{knob} a non-empty list of values, got {values!r}")
    return [dict(zip(ranges, combo)) for combo in itertools.product(*ranges.values())]


def tune_fusion(experiment: Experiment, ranges: dict[str, list[Any]], *, seed: int = 0,
                metric: str | None = None, progress: bool = False) -> Tuned:
    """Tune ``retrieval.fusion`` knobs of ``experiment`` on a seeded half of its questions and report the chosen
    values on the other half. The corpus is prepared once and each config's legs built once."""
    try:
        candidates = fusion_candidates(ranges)
    except ValueError as e:
        raise ConfigError(f"search.{e}") from None
    experiments = []
    for update in candidates:  # each candidate a valid config, or one line naming it, before any work
        data = experiment.resolved()
        data["retrieval"]["fusion"].update(update)
        try:
            experiments.append(type(experiment).model_validate(data))
        except ValidationError as e:
            knobs = ", ".join(f"{knob}={value}" for knob, value in update.items())
            problems = "; ".join(format_error(err, "", Experiment) for err in e.errors())
            raise ConfigError(f"search.tune: the candidate {knobs} is no valid config: {problems}") from None
    corpus = prepare_corpus(experiment, progress=progress)
    try:
        legs = build_legs(leg_contexts(corpus.context, experiment.retrieval, corpus.indexes), experiment.retrieval)
        ids = [q.query_id for q in corpus.dataset.queries]
        tune_ids, report_ids = split_halves(ids, seed)
        chosen_metric: list[str] = [metric] if metric else []

        def score(index: int, question_ids: list[str]) -> np.ndarray:
            wanted = set(question_ids)
            batch = replace(corpus.dataset, queries=[q for q in corpus.dataset.queries if q.query_id in wanted])
            candidate = experiments[index]
            found = search_corpus(replace(corpus, dataset=batch), candidate, legs=legs)
            per_query, _ = evaluate_run(batch, found.units, found.run, candidate.evaluation)
            if not chosen_metric:
                chosen_metric.append(headline_metric(per_query.columns) or "")
            return per_query.set_index("query_id").loc[question_ids, chosen_metric[0]].to_numpy(dtype=float)

        tuned = tune(list(range(len(candidates))), score, tune_ids, report_ids)
    finally:
        corpus.close()
    tuned.best = candidates[tuned.best]
    tuned.metric = chosen_metric[0]
    tuned.trials = [(candidates[i], mean) for i, mean in tuned.trials]
    return tuned
