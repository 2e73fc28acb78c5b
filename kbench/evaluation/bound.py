"""The pick's bound: how much better than the picked config any other config could be, at a stated confidence.

    found = pick_bound(pick, others, "chunk_ndcg_at_10", estimator=PairedT(), alpha=0.05)   # recommend's records
    found.value          # no config here is better than the pick by more than this (headline units, >= 0)
    found.advantages     # other -> the upper bound of mean(other - pick): what each could be better by
    found.ruled_out({"b": 0.01, ...})   # the configs shown worse than the pick by more than their margin

Each other config's advantage over the pick, mean(other - pick) on one metric, gets a one-sided upper confidence
bound at ``alpha / k`` (k: the other configs; Bonferroni), from the estimator's own test (``versus`` at a zero margin:
the paired t for ``PairedT``, the normal PPI++ interval for ``ppi.PPIEstimator``), so the bound means the same under
human labels. The ``k`` bounds hold together with probability at least ``1 - alpha``, whichever config the data made
the pick: for the truly best config B, the event "B beats the pick by more than the pick's bound" lies inside the
event "one of B's k comparisons misses", which has probability at most ``alpha`` (Hsu's argument for comparisons
with the best). Holm's step-down, which the rule used before, tests a family fixed in advance; with the pick chosen
by the same data its bound missed in up to 14% of simulated draws (16 configs, one slightly better than the rest),
where this one stays under 5% (tests/evaluation/test_bound.py).

The bound and the rule are one: the recommendation is *decided* exactly when every other config's bound is below
the margin (``recommend``'s step 6, the same test at ``alpha / k`` for each other config), so the bound is the
smallest margin at which the rule decides its pick, and the configs *ruled out* are those whose advantage is below
minus the margin: shown worse than the pick by more than it. One number per config, one threshold.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol


class Versus(Protocol):  # what the bound needs of an estimator (recommend.PairedT, ppi.PPIEstimator)
    def versus(self, candidate, reference, metric: str, margin: float, alpha: float): ...


@dataclass(frozen=True)
class Bound:
    """The simultaneous one-sided upper bounds of each other config's advantage over the pick."""

    pick: str
    metric: str
    advantages: dict[str, float] = field(default_factory=dict)  # other -> upper bound of mean(other - pick)
    alpha: float = 0.05  # of the whole statement
    confidence: str = ""  # the statement's confidence in words ("95%"; "95% over every look"), "" for 1 - alpha

    @property
    def comparisons(self) -> int:
        return len(self.advantages)

    @property
    def level(self) -> float:
        """Each comparison's one-sided level: ``alpha`` shared out over the others (Bonferroni)."""
        return self.alpha / max(self.comparisons, 1)

    @property
    def value(self) -> float:
        """No config here is better than the pick by more than this; 0 when the pick is shown better than every
        other (NaN with nothing to compare)."""
        if not self.advantages:
            return math.nan
        return max(0.0, max(self.advantages.values()))

    def ruled_out(self, margins: dict[str, float]) -> list[str]:
        """The configs shown worse than the pick by more than their margin (``margins``: other -> the margin in the
        metric's units), in the order of ``advantages``."""
        return [c for c, upper in self.advantages.items() if upper < -margins[c]]

    def words(self) -> str:
        """``95%, simultaneous over 7 configs by Bonferroni``: what the bound's confidence is and how it is shared."""
        confidence = self.confidence or f"{1 - self.alpha:.0%}"
        if self.comparisons == 1:
            return confidence
        return f"{confidence}, simultaneous over {self.comparisons} configs by Bonferroni"


def pick_bound(pick, others: list, metric: str, *, estimator: Versus, alpha: float = 0.05,
               confidence: str = "") -> Bound:
    """The bound of ``pick`` (a ``recommend.ConfigRecord``) against ``others`` on ``metric``: each other config's
    one-sided (1 - alpha/k) upper bound of mean(other - pick), from ``estimator.versus`` at a zero margin
    (``recommend.PairedT()``, or ``ppi.PPIEstimator`` under human labels)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1, got {alpha}")
    level = alpha / max(len(others), 1)
    return Bound(pick.label, metric, {o.label: -estimator.versus(pick, o, metric, 0.0, level).lower_bound
                                      for o in others}, alpha, confidence)
