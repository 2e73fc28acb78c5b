"""The one floor every LLM stage holds its answers to: too few usable answers stop the stage.

An LLM stage asks ``total`` questions (a judge grade, a context, a rewrite, a ranking, a question with its
quote, a ragas verdict). Each answer is *usable* (the stage could read what it asked for), *unusable* (it
arrived but holds nothing the stage can use: no grade, an empty context, no index list) or *failed* (no
answer at all after the client's retries). A stage whose usable share is below ``llm.policy.min_usable``
(default 80%) would report numbers that are mostly fallbacks, so it stops with one line naming the count, the
model and the fix (``UnusableAnswersError``: exit 2), unless ``llm.policy.allow_partial`` is set
(``--allow-partial``): then it goes on, says so on stderr, and the run carries metric ``llm_<stage>_partial``
and tag ``kbench.llm.partial``.

    check_usable(UsableCount("judge", "smollm2", total=56, usable=2, failed=0), policy, fix="use a stronger model")

Every stage calls ``check_usable`` (directly, or through ``LLMClient.require_usable``), so the rule, the
message and the tag are the same everywhere. ``LLMClient.chat_many(usable=...)`` also stops a batch early once
the floor can no longer be met, so a weak model costs a few answers, not the whole batch.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Callable

from kbench.llm.config import LLMPolicy
from kbench.llm.errors import LLMError
from kbench.llm.usage import UsageMeter

PARTIAL_COUNTER = "partial"  # UsageMeter counter: 1 per stage that went on below the floor (allow_partial)


class UnusableAnswersError(LLMError):
    """Too few of an LLM stage's answers were usable: its results would be mostly fallbacks."""


@dataclass(frozen=True)
class UsableCount:
    """How one stage's answers went. ``section`` names what the user sets (``judge``, ``enrichment``,
    ``query.expansion`` ...); ``stage`` the meter's stage name (``query_expansion``)."""

    section: str
    model: str
    total: int  # questions asked (answered from the cache or not)
    usable: int
    failed: int = 0  # no answer at all (after retries)
    stage: str = ""
    asked: int | None = None  # when a batch stopped early: how many were answered before it stopped

    @property
    def unusable(self) -> int:
        return (self.total if self.asked is None else self.asked) - self.usable - self.failed

    def describe(self) -> str:
        of = f"{self.usable} of {self.total}" if self.asked is None or self.asked >= self.total else \
            f"{self.usable} of the first {self.asked} (of {self.total})"
        return (f"{of} answers usable ({self.unusable} unusable, {self.failed} failed) from model "
                f"{self.model or '?'}")


def most_bad_allowed(total: int, min_usable: float) -> int:
    """How many of ``total`` answers may be unusable or failed with the floor still met."""
    return total - math.ceil(min_usable * total - 1e-9)


def below_floor(count: UsableCount, policy: LLMPolicy) -> bool:
    if count.total == 0:
        return False
    if count.asked is not None:  # stopped early: the floor could no longer be met
        return True
    return count.usable < math.ceil(policy.min_usable * count.total - 1e-9)


def check_usable(count: UsableCount, policy: LLMPolicy, *, fix: str, meter: UsageMeter | None = None,
                 warn: Callable[[str], None] | None = None) -> bool:
    """Raise ``UnusableAnswersError`` when the usable share is below ``policy.min_usable``; with
    ``policy.allow_partial`` say so on stderr, count ``partial`` in ``meter`` and return True instead.
    Returns False when the floor is met."""
    if not below_floor(count, policy):
        return False
    line = (f"{count.section}: {count.describe()}, below the floor of {policy.min_usable:.0%} "
            f"(llm.policy.min_usable); {fix}")
    if not policy.allow_partial:
        raise UnusableAnswersError(f"{line}; or keep going on what is usable with --allow-partial "
                                   "(llm.policy.allow_partial: true)")
    (warn or _stderr)(f"kbench: WARNING: {line}; going on anyway (allow_partial): what {count.section} gives rests "
                      f"on {count.usable} usable answers and is marked partial")
    if meter is not None:
        meter.add(count.stage or count.section, count.model, **{PARTIAL_COUNTER: 1})
    return True


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
