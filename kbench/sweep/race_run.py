"""Run a sweep by racing (``search: {strategy: race}``), in this process.

    outcome = run_race(plan, ConfigScorer(plan), say=print)

The race (``racing.race``) scores the configs on seeded, growing batches of questions through one
``ConfigScorer`` (one corpus per chunking + embedding group, embedded only when a config of the group is first
scored; a group's corpus is closed once none of its configs is left). When it ends, the configs still in it are
scored on the questions they have not seen, so the ranking at the end is over every question and made as a
grid's is (``search_outcome``). The configs that left are listed with the round, the questions they were scored
on and the p-value that dropped them.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from kbench.compare import headline_metric
from kbench.sweep.expand import SweepPlan
from kbench.sweep.racing import Dropped, RaceResult, question_batches, race
from kbench.sweep.scoring import ConfigScorer, SearchStrategyError
from kbench.sweep.search import SearchConfig
from kbench.sweep.search_outcome import SearchOutcome, compare_frames, recommend, search_evidence


def first_batch(n_questions: int, configured: int | None) -> int:
    """An eighth of the questions, at least 10 (all of them when there are fewer)."""
    return min(n_questions, configured or max(10, n_questions // 8))


def race_configs(labels: list[str], scorer: ConfigScorer, ids: list[str], settings: SearchConfig, *, alpha: float,
                 say: Callable[[str], None] = print, release: bool = True, intro: str = "race: ",
                 known: dict[str, pd.DataFrame] | None = None) -> tuple[RaceResult, dict[str, pd.DataFrame], str]:
    """Race ``labels`` on ``ids``, then score the configs left on the questions they have not seen. Returns the
    race, the survivors' per-query results over every question (in ``ids``' order) and the headline metric.
    ``release``: close a corpus once no config left in the race searches it (a stage of a stage-wise search
    keeps its corpora: a later stage searches the pick's). ``known``: configs already scored on every question
    (the pick of the stage before), whose results are read, not scored again."""
    known = known or {}

    def scored(alive: list[str], batch: list[str]) -> dict[str, pd.DataFrame]:
        todo = [label for label in alive if label not in known]
        got = scorer.score(todo, batch) if todo else {}
        return {label: got[label] if label in got else known[label].loc[batch] for label in alive}

    batches = question_batches(ids, first=first_batch(len(ids), settings.first), growth=settings.growth,
                               seed=settings.seed)
    frames: dict[str, list[pd.DataFrame]] = {label: [] for label in labels}
    headline: list[str] = []

    def note_headline(got: dict[str, pd.DataFrame]) -> None:
        if not headline:
            found = headline_metric(next(iter(got.values())).columns)
            if found is None:
                raise SearchStrategyError("search: race needs a ranking metric (nDCG@k) in the per-query results")
            headline.append(found)

    def score(alive: list[str], batch: list[str]) -> dict[str, np.ndarray]:
        got = scored(alive, batch)
        note_headline(got)
        for label, frame in got.items():
            frames[label].append(frame)
        return {label: frame[headline[0]].to_numpy(dtype=float) for label, frame in got.items()}

    def on_round(n: int, alive: list[str], leaving: list[Dropped]) -> None:
        if release:
            scorer.release(alive)
        seen = sum(len(b) for b in batches[:n])
        say(f"  round {n}/{len(batches)}: {seen} questions, {len(leaving)} dropped, {len(alive)} left")

    say(f"{intro}{len(labels)} configs, {len(ids)} questions in {len(batches)} batches "
        f"({', '.join(str(len(b)) for b in batches)}), alpha {alpha:.3g}")
    result = race(labels, batches, score, alpha=alpha, test=settings.test, on_round=on_round)
    rest = [q for b in batches[result.rounds:] for q in b]
    if rest:  # the configs left are scored on every question, so the ranking is over all of them
        say(f"  scoring the {len(result.survivors)} configs left on the other {len(rest)} questions")
        got = scored(result.survivors, rest)
        note_headline(got)  # one config raced: no round ran, so no headline yet
        for label, frame in got.items():
            frames[label].append(frame)
    full = {label: pd.concat(frames[label]).loc[ids] for label in result.survivors}
    return result, full, headline[0]


def run_race(plan: SweepPlan, scorer: ConfigScorer, say: Callable[[str], None] = print) -> SearchOutcome:
    settings = plan.search
    ids = scorer.question_ids()
    if len(ids) < 2:
        raise SearchStrategyError(f"search: race needs at least 2 questions, the dataset has {len(ids)}")
    labels = [c.label for c in plan.configs]
    result, full, headline = race_configs(labels, scorer, ids, settings, alpha=settings.alpha, say=say,
                                          intro=f"race {plan.name}: ")
    comparison = compare_frames(full, headline, plan, scorer.costs)
    recommended, recommendation = recommend(comparison, full, headline, plan.baseline.recommend,
                                            search_evidence(plan, scorer))
    return SearchOutcome("race", headline, len(ids), len(labels), scorer.cost, full, comparison, recommended,
                         recommendation, race=result)
