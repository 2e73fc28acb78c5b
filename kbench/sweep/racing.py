"""Racing: stop scoring configs that are significantly worse than the best, with a stated error rate.

    batches = question_batches(query_ids, first=25, seed=0)          # 25, 50, 100, ... questions so far
    result = race(labels, batches, score, alpha=0.05)                 # score(labels, batch ids) -> {label: array}
    result.survivors, result.dropped                                  # who is left; who left at which round, p

Every round scores the configs still in the race on the next batch of questions (seeded, so a race can be run
again), then tests each of them against the current best (highest mean on every question so far) with a
paired test on those questions. A config whose difference to the best is significant, with the best ahead,
leaves the race. The race ends when one config is left or the questions run out.

**Error control.** The risk racing takes is dropping the config that is truly best. That happens only if, in
some round, one of the (configs - 1) tests that compare it with another config rejects in the wrong direction.
There are at most ``rounds x (configs - 1)`` such tests, so testing each at ``alpha / (rounds x (configs - 1))``
(Bonferroni over rounds and comparisons) keeps the probability of ever dropping the true best at or below
``alpha``, however the rounds depend on each other and whichever config leads in each round (a union bound
needs no independence). It is conservative: Holm or an alpha-spending schedule would drop sooner; this one
is simple to state and to check (tests/sweep/test_racing.py simulates it). ``rounds`` is the planned number
of batches, fixed before any score is seen.

The core is functions on per-query score arrays: the scoring function is the only link to pipelines, so the
error control is tested on synthetic scores.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from kbench.evaluation.significance import TESTS
from kbench.sweep.sequential import growing_batches

RACE_TESTS = ("t", "wilcoxon")  # continuous p-values: a randomization test cannot resolve alpha / (rounds x configs)


@dataclass(frozen=True)
class Dropped:
    label: str
    round: int  # 1-based round after which it left
    questions: int  # how many questions it was scored on
    mean: float  # its mean on them
    best: str  # the config it lost to
    diff: float  # its mean minus the best's on those questions (< 0)
    p_value: float  # the paired test's p-value (uncorrected); it left because p < threshold


@dataclass
class RaceResult:
    survivors: list[str]  # still in the race at the end, in the order given
    dropped: list[Dropped]
    rounds: int  # rounds run
    planned_rounds: int
    threshold: float  # the per-test level: alpha / (planned_rounds x (configs - 1))
    alpha: float
    test: str
    scores: dict[str, np.ndarray] = field(default_factory=dict)  # per config, its scores on the questions it saw
    scored: dict[str, int] = field(default_factory=dict)  # per config, how many questions it was scored on

    @property
    def correction(self) -> str:
        comparisons = max(1, len(self.survivors) + len(self.dropped) - 1)
        return (f"Bonferroni over {self.planned_rounds} rounds x {comparisons} comparisons: each paired {self.test}-test "
                f"at {self.alpha} / {self.planned_rounds * comparisons} = {self.threshold:.3g}, so the best config is "
                f"dropped with probability at most {self.alpha}")


def question_batches(query_ids: list[str], *, first: int, growth: float = 2.0, seed: int = 0) -> list[list[str]]:
    """The questions in a seeded order, cut into batches whose running totals grow by ``growth`` from ``first``
    (25, 50, 100, ... and the rest): few rounds, so the correction stays mild."""
    if first < 2:
        raise ValueError(f"search.first: a paired test needs at least 2 questions in the first batch, got {first}")
    if growth <= 1:
        raise ValueError(f"search.growth must be above 1, got {growth}")
    ordered = sorted(query_ids)
    order = np.random.default_rng(seed).permutation(len(ordered))
    return growing_batches([ordered[i] for i in order], first=first, growth=growth)


def paired_p(a: np.ndarray, b: np.ndarray, test: str) -> float:
    """Two-sided p-value of the paired test; 1 when the scores do not differ (no evidence to drop)."""
    if test not in RACE_TESTS:
        raise ValueError(f"search.test: {test!r}; a race takes {', '.join(RACE_TESTS)}")
    p = TESTS[test](a, b).p_value
    return 1.0 if math.isnan(p) else float(p)


def race(labels: list[str], batches: list[list[str]],
         score: Callable[[list[str], list[str]], dict[str, np.ndarray]], *, alpha: float = 0.05,
         test: str = "t", on_round: Callable[[int, list[str], list[Dropped]], None] | None = None) -> RaceResult:
    """Race ``labels`` over ``batches``; ``score(alive labels, batch question ids)`` returns each alive config's
    scores on that batch, in the batch's order. Equal means keep the order given (the first is the best)."""
    if not 0 < alpha < 1:
        raise ValueError(f"search.alpha must be between 0 and 1, got {alpha}")
    if len(set(labels)) != len(labels):
        raise ValueError("race: config labels repeat")
    planned = len(batches)
    threshold = alpha / (planned * max(1, len(labels) - 1))
    alive = list(labels)
    seen: dict[str, list[np.ndarray]] = {label: [] for label in labels}
    dropped: list[Dropped] = []
    rounds = 0
    for batch in batches:
        if len(alive) <= 1:
            break
        rounds += 1
        got = score(list(alive), list(batch))
        for label in alive:
            values = np.asarray(got[label], dtype=float)
            if values.shape != (len(batch),):
                raise ValueError(f"race: {label} got {values.shape} scores for a batch of {len(batch)} questions")
            seen[label].append(values)
        so_far = {label: np.concatenate(seen[label]) for label in alive}
        best = max(alive, key=lambda label: (so_far[label].mean(), -alive.index(label)))
        n = len(so_far[best])
        leaving = []
        if n >= 2:
            for label in alive:
                if label == best:
                    continue
                diff = float(so_far[label].mean() - so_far[best].mean())
                p = paired_p(so_far[best], so_far[label], test)
                if diff < 0 and p < threshold:
                    leaving.append(Dropped(label, rounds, n, float(so_far[label].mean()), best, diff, p))
        dropped += leaving
        gone = {d.label for d in leaving}
        alive = [label for label in alive if label not in gone]
        if on_round is not None:
            on_round(rounds, list(alive), leaving)
    scores = {label: np.concatenate(v) if v else np.zeros(0) for label, v in seen.items()}
    return RaceResult(alive, dropped, rounds, planned, threshold, alpha, test, scores,
                      {label: len(s) for label, s in scores.items()})
