"""``kbench sweep CONFIG --until-decided [--max-questions N] [--max-minutes M]``: score the grid on growing batches
of questions until the recommendation is decided at the margin, or a budget is spent.

    outcome = run_until_decided("configs/sweeps/your-docs.yaml", ["dataset.path=sets/docs"], max_questions=400)
    outcome.lines()     # where the questions come from, each look, why it stopped, the ranking, the pick and its bound

The questions come from ``grow.question_source``: a generated set's own questions first, then more of the questions
its documents give, in the generator's order (spread over the documents, none repeated, the indexed documents
unchanged); any other set's questions in a seeded order. The configs are scored through one
``scoring.ConfigScorer`` (one corpus per chunking and embedding group, as a race scores them); each look recommends over every question so far at the look's
share of alpha (``sequential``), and the configs it rules out are scored no more. At the end the configs still in
contention are compared over every question asked, as a grid's are, and the last look's recommendation, with its
bound, is the outcome's, logged as one MLflow run (``search_outcome.log_search``, strategy ``until-decided``).
"""
from __future__ import annotations

import time
from typing import Callable

import numpy as np
import pandas as pd

from kbench.compare import headline_metric
from kbench.compare.recommendation import recommend_comparison
from kbench.evaluation.recommend import ConfigRecord, recommend
from kbench.paths import workspace_dir
from kbench.sweep.expand import SweepPlan, load_sweep
from kbench.sweep.grow import question_source
from kbench.sweep.race_run import first_batch
from kbench.sweep.scoring import ConfigScorer, SearchStrategyError
from kbench.sweep.search_outcome import SearchOutcome, compare_frames, log_search, search_evidence
from kbench.sweep.sequential import growing_batches, spent_words, until_decided

ALPHA = 0.05  # of the bound over every look (the recommendation's alpha)
STRATEGY = "until-decided"


def plan_with_questions(config: str, overrides: list[str]) -> tuple[SweepPlan, object]:
    """The sweep's plan on the questions ``--until-decided`` asks (the set grown when it is a generated one), and
    where they come from (``grow.QuestionSource``)."""
    plan = load_sweep(config, overrides)
    if plan.search.strategy != "grid":
        raise SearchStrategyError(f"--until-decided scores the grid itself; this config searches by "
                                  f"{plan.search.strategy} (drop the search block, or use search: {{strategy: grid}})")
    if plan.baseline.dataset.max_queries:
        raise SearchStrategyError("--until-decided chooses the questions itself; drop dataset.max_queries (cap them "
                                  "with --max-questions)")
    source = question_source(plan.baseline.dataset, workspace_dir(plan.baseline.workspace))
    if source.path is not None:
        command = plan.command
        plan = load_sweep(config, [*overrides, f"dataset.path={source.path}"])
        plan.command = command  # the next steps name the user's set, not the grown copy
    return plan, source


def run_until_decided(config: str, overrides: list[str], *, max_questions: int | None = None,
                      max_minutes: float | None = None, say: Callable[[str], None] = print, progress: bool = False,
                      log: bool = True) -> SearchOutcome:
    if max_questions is not None and max_questions < 2:
        raise SearchStrategyError(f"--max-questions {max_questions}: a paired test needs at least 2 questions")
    if max_minutes is not None and max_minutes <= 0:
        raise SearchStrategyError(f"--max-minutes {max_minutes}: give a positive number of minutes")
    started_ms = int(time.time() * 1000)  # the MLflow run's start: when the looks began, not their logging
    plan, source = plan_with_questions(config, overrides)
    scorer = ConfigScorer(plan, progress=progress)
    try:
        ids = scorer.question_ids()
        if len(ids) < 2:
            raise SearchStrategyError(f"--until-decided needs at least 2 questions, the dataset has {len(ids)}")
        if not source.ordered:
            ids = [ids[i] for i in np.random.default_rng(plan.search.seed).permutation(len(ids))]
        first = min(len(ids), plan.search.first or source.first or first_batch(len(ids), None))
        batches = growing_batches(ids, first=max(2, first), growth=plan.search.growth, limit=max_questions)
        say(f"until decided: {len(plan.configs)} configs on {source.words}; looks at "
            f"{', '.join(str(n) for n in np.cumsum([len(b) for b in batches]))} questions"
            + (f", at most {max_minutes:g} minutes" if max_minutes else ""))
        outcome = _look_until_decided(plan, scorer, batches, max_minutes, say)
        outcome.notes.insert(0, f"questions: {source.words}")
        if max_questions is not None and outcome.sequence.stopped == "exhausted" and max_questions < len(ids):
            outcome.sequence.stopped = "questions"
    finally:
        scorer.close()
    if log:
        log_search(plan, outcome, started_ms=started_ms)
    return outcome


def _look_until_decided(plan: SweepPlan, scorer: ConfigScorer, batches: list[list[str]], max_minutes: float | None,
                        say: Callable[[str], None]) -> SearchOutcome:
    headline: list[str] = []
    evidence: list = []
    frames: dict[str, list[pd.DataFrame]] = {}  # label -> its results, batch by batch

    def score(contention: list[str], batch: list[str]) -> dict[str, pd.DataFrame]:
        got = scorer.score(contention, batch)
        if not headline:
            found = headline_metric(next(iter(got.values())).columns)
            if found is None:
                raise SearchStrategyError("--until-decided needs a ranking metric (nDCG@k) in the per-query results")
            headline.append(found)
        for label, frame in got.items():
            frames.setdefault(label, []).append(frame)
        return got

    def decide(seen: dict[str, list[pd.DataFrame]], level: float, look: int):
        if not evidence:  # the scorer knows each corpus's languages once it has scored every config
            evidence.append(search_evidence(plan, scorer))
        records = []
        for label, parts in seen.items():
            frame = pd.concat(parts)
            records.append(ConfigRecord(label, {c: frame[c].to_numpy(dtype=float) for c in frame.columns
                                                if frame[c].dtype.kind in "fi"}, scorer.costs.get(label, {})))
        return recommend(records, headline[0], plan.baseline.recommend, alpha=level, evidence=evidence[0],
                         confidence=spent_words(look, ALPHA))

    def on_look(look) -> None:
        scorer.release([c for c in look.contention if c not in look.ruled_out])
        say(f"  {look.line()}")

    result = until_decided([c.label for c in plan.configs], batches, score, decide, alpha=ALPHA,
                           seconds=max_minutes * 60 if max_minutes else None, on_look=on_look)
    last = result.looks[-1]
    full = {label: pd.concat(frames[label]) for label in last.contention}
    comparison = compare_frames(full, headline[0], plan, scorer.costs)
    recommendation = recommend_comparison(comparison, plan.baseline.recommend, evidence=evidence[0],
                                          alpha=last.alpha, confidence=spent_words(last.look, ALPHA))
    return SearchOutcome(STRATEGY, headline[0], last.questions, len(plan.configs), scorer.cost, full, comparison,
                         recommendation.config, recommendation, sequence=result)
