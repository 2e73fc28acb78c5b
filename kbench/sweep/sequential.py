"""Growing the evidence until the set decides (``kbench sweep ... --until-decided``), on score arrays.

    result = until_decided(labels, batches, score, decide, alpha=0.05, seconds=600)
    result.looks          # one Look per batch: questions so far, the configs in contention, the pick, its bound
    result.stopped        # decided | questions | minutes | exhausted
    result.final          # the last look's recommendation (evaluation.recommend.Recommendation)

Each look scores the configs still in contention on the next batch of questions, then recommends over every
question so far (``decide(frames so far, alpha_k)``: ``evaluation.recommend`` at the look's alpha). Configs the look
rules out (shown worse than its pick by more than the margin) leave the contention and are scored no more. The loop
stops at the first look whose pick is decided, when the questions or the time run out.

**Repeated looks.** A bound computed at alpha after every batch, stopping at the first that decides, would be
wrong more often than alpha: each look is another chance to stop on a lucky draw. Look k therefore spends
``alpha_k = alpha / (k (k + 1))`` (``look_alpha``), and the alphas of every look, however many, sum to at most
``alpha``, so with probability at least ``1 - alpha`` every look's statement holds at once, whichever look the
loop stops at and whatever it dropped before (a union bound needs no independence between looks). A dropped config
was shown worse by more than the margin than a pick still bounded at the end, so the last bound covers it too.
The first look spends half of alpha, the second a sixth, the fifth a thirtieth: fewer, larger batches (each doubles
the questions so far by default) keep the bound close to a single look's. ``tests/sweep/test_sequential.py`` checks
the coverage by simulation over 24 looks; ``benchmarks/decision_bound.py`` on real questions.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

STOPS = {"decided": "decided at the margin", "questions": "the question budget is spent",
         "minutes": "the time budget is spent", "exhausted": "the set has no more questions"}


def look_alpha(look: int, alpha: float) -> float:
    """The alpha look ``look`` (1-based) spends: ``alpha / (look (look + 1))``; the sum over every look is alpha."""
    if look < 1:
        raise ValueError(f"looks are counted from 1, got {look}")
    return alpha / (look * (look + 1))


def spent_words(look: int, alpha: float) -> str:
    """The bound's confidence in words at this look: ``95% over every look (alpha 0.05/(k(k+1)) at look k: 0.0083
    at look 2)``."""
    return (f"{1 - alpha:.0%} over every look: alpha {alpha:g}/(k(k+1)) at look k, {look_alpha(look, alpha):.3g} at "
            f"look {look}")


def growing_batches(ids: list[str], *, first: int, growth: float = 2.0, limit: int | None = None) -> list[list[str]]:
    """``ids`` (in the order they are to be asked) cut into batches whose running totals are ``first``, then
    ``growth`` times the last total, up to ``limit`` questions (default: all)."""
    if first < 2:
        raise ValueError(f"the first batch needs at least 2 questions (a paired test), got {first}")
    if growth <= 1:
        raise ValueError(f"the growth of the questions per look must be above 1, got {growth}")
    ids = ids[:limit] if limit is not None else list(ids)
    batches, start, total = [], 0, float(min(first, len(ids)))
    while start < len(ids):
        stop = min(len(ids), max(start + 1, int(round(total))))
        batches.append(ids[start:stop])
        start, total = stop, total * growth
    return batches


@dataclass(frozen=True)
class Look:
    look: int
    questions: int  # questions so far
    alpha: float  # what this look spent
    contention: list[str]  # the configs scored in this look
    pick: str | None
    bound: float
    decided: bool
    ruled_out: list[str]  # left the contention after this look
    seconds: float  # since the loop began

    def line(self) -> str:
        state = "decided" if self.decided else "provisional"
        gone = f"; ruled out, no longer scored: {', '.join(self.ruled_out)}" if self.ruled_out else ""
        return (f"look {self.look}: {self.questions} questions, {len(self.contention)} configs in contention, alpha "
                f"{self.alpha:.3g}; pick {self.pick} ({state}, bound {self.bound:.4f}){gone}")


@dataclass
class SequentialResult:
    looks: list[Look]
    stopped: str  # a key of STOPS
    final: object  # the last look's recommendation
    alpha: float
    planned: int  # batches there were to ask
    dropped: dict[str, int] = field(default_factory=dict)  # config -> the look that ruled it out

    @property
    def questions(self) -> int:
        return self.looks[-1].questions if self.looks else 0

    def lines(self, indent: str = "  ") -> list[str]:
        out = [f"{indent}{look.line()}" for look in self.looks]
        out.append(f"{indent}stopped after look {len(self.looks)} of {self.planned} planned: {STOPS[self.stopped]}; "
                   f"each look k spent alpha {self.alpha:g}/(k(k+1)), {self.alpha:g} over any number of looks, so the "
                   f"bound below holds at {1 - self.alpha:.0%} whichever look stopped")
        return out


def until_decided(labels: list[str], batches: list[list[str]], score: Callable[[list[str], list[str]], dict],
                  decide: Callable[[dict[str, list], float, int], object], *, alpha: float = 0.05,
                  seconds: float | None = None, clock: Callable[[], float] = time.monotonic,
                  on_look: Callable[[Look], None] | None = None) -> SequentialResult:
    """Look after each of ``batches`` until the pick is decided. ``score(contention, batch ids)`` returns each
    config's results on the batch (anything ``decide`` reads, one per config); ``decide(results so far, alpha_k,
    look)`` gets, per config in contention, the list of its batches' results and returns a recommendation
    (``.config``, ``.decided``, ``.bound``, ``.ruled_out``). ``seconds``: no new look starts after this long."""
    if len(labels) < 2:
        raise ValueError(f"deciding needs at least 2 configs, got {len(labels)}")
    started = clock()
    contention = list(labels)
    seen: dict[str, list] = {label: [] for label in labels}
    looks: list[Look] = []
    dropped: dict[str, int] = {}
    final, stopped, questions = None, "exhausted", 0
    for k, batch in enumerate(batches, start=1):
        if looks and seconds is not None and clock() - started >= seconds:
            stopped = "minutes"
            break
        got = score(list(contention), list(batch))
        for label in contention:
            seen[label].append(got[label])
        questions += len(batch)
        level = look_alpha(k, alpha)
        final = decide({label: seen[label] for label in contention}, level, k)
        ruled = [c for c in final.ruled_out if c in contention]
        look = Look(k, questions, level, list(contention), final.config, float(final.bound), bool(final.decided),
                    ruled, clock() - started)
        looks.append(look)
        if on_look is not None:
            on_look(look)
        if final.decided:
            stopped = "decided"
            break
        for c in ruled:
            dropped[c] = k
        contention = [c for c in contention if c not in ruled]
        if len(contention) < 2:  # every other config ruled out: the next look would have nothing to compare
            stopped = "decided"
            break
    else:
        stopped = "exhausted"
    return SequentialResult(looks, stopped, final, alpha, len(batches), dropped)
