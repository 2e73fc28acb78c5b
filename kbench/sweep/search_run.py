"""``kbench sweep`` with a ``search:`` block other than grid: race or stage-wise, then log the outcome.

    outcome = run_search(plan, say=print)     # plan.search.strategy: race | stagewise
    outcome.lines()                           # what ran, what was dropped or fixed when, the ranking, the pick
"""
from __future__ import annotations

import time

from typing import Callable

from kbench.sweep.expand import SweepPlan
from kbench.sweep.race_run import run_race
from kbench.sweep.scoring import ConfigScorer, SearchStrategyError
from kbench.sweep.search_outcome import SearchOutcome, log_search
from kbench.sweep.stagewise import run_stagewise


def run_search(plan: SweepPlan, *, say: Callable[[str], None] = print, progress: bool = False,
               log: bool = True) -> SearchOutcome:
    """Race or stage-wise search of ``plan`` (``plan.search.strategy``), logged unless ``log`` is false."""
    started_ms = int(time.time() * 1000)  # the search parent run's start: when the search began, not its logging
    scorer = ConfigScorer(plan, progress=progress)
    try:
        if plan.search.strategy == "race":
            outcome = run_race(plan, scorer, say)
        elif plan.search.strategy == "stagewise":
            outcome = run_stagewise(plan, scorer, say)
        else:
            raise SearchStrategyError(f"search.strategy {plan.search.strategy!r} runs through run_sweep")
    finally:
        scorer.close()
    if log:
        log_search(plan, outcome, started_ms=started_ms)
    return outcome
