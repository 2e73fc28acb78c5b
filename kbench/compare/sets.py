"""Two evaluation sets, the same configs: do they rank them alike? (``kbench compare --sets SWEEP SWEEP``)

    agreement = compare_sets({"fixed": scores, ...}, {"fixed": scores, ...}, names=("heading", "ict"),
                             metric="chunk_ndcg_at_10")
    print("\\n".join(agreement.lines()))

Each set is a plain table: config label -> per-question scores (the set's own questions). Configs are matched
by label (two sweeps of one sweep file on two datasets give the same labels); a config in one set only is left
out, and said. The result holds:

- Kendall's tau-b between the configs' means on the two sets, with a percentile bootstrap interval over
  questions (``evaluation.agreement.tau_interval``: each set's questions resampled on their own);
- best agreement: each set's best config by mean, and whether it is in the other set's top tie (the best and every
  config not significantly worse, ``significance.rank_against_best``, as ``kbench compare`` ranks them);
- the flips: the pairs of configs the two sets order the other way round (tau-b's discordant pairs), each with
  its difference and paired-test p-value (uncorrected) on both sets, so a flip that is noise on one set reads
  as such.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np

from kbench.errors import UserError
from kbench.evaluation.agreement import config_means, kendall_tau, tau_interval
from kbench.evaluation.significance import TESTS, rank_against_best


class SetsError(UserError, ValueError):
    pass


@dataclass(frozen=True)
class Flip:
    first: str  # ahead on set A
    second: str  # ahead on set B
    diff_a: float  # mean(first) - mean(second) on A (> 0)
    diff_b: float  # the same on B (< 0)
    p_a: float  # paired test of the two on A (uncorrected)
    p_b: float


@dataclass
class SetsAgreement:
    names: tuple[str, str]
    metric: str
    labels: list[str]
    questions: tuple[int, int]
    means: dict[str, tuple[float, float]]  # label -> (mean on A, mean on B)
    ranks: dict[str, tuple[int, int]]  # label -> (rank on A, rank on B); 1 = best
    tau: float
    tau_low: float
    tau_high: float
    confidence: float
    ties: tuple[list[str], list[str]]  # each set's top tie, best first
    flips: list[Flip]
    left_out: dict[str, str] = field(default_factory=dict)  # label -> which set lacks it
    test: str = "randomization"
    alpha: float = 0.05

    @property
    def winners(self) -> tuple[str, str]:
        return self.ties[0][0], self.ties[1][0]

    @property
    def pairs(self) -> int:
        return len(self.labels) * (len(self.labels) - 1) // 2

    @property
    def agreement(self) -> str:
        """``agree`` (the tau interval lies above 0), ``reversed`` (below 0) or ``not shown`` (it includes 0)."""
        if self.tau_low > 0:
            return "agree"
        if self.tau_high < 0:
            return "reversed"
        return "not shown"

    def verdict(self) -> str:
        """The tau interval in words: what a ranking made on one set says about the other."""
        a, b = self.names
        if self.agreement == "agree":
            flips = f", yet {len(self.flips)} of {self.pairs} pairs flip (below)" if self.flips else ""
            return (f"verdict: {a} and {b} agree on the order of these configs more than chance would (the interval "
                    f"lies above 0){flips}")
        if self.agreement == "reversed":
            return (f"verdict: {a} and {b} order these configs the other way round (the interval lies below 0): a "
                    "ranking on one is contradicted by the other")
        return (f"verdict: these two sets do not agree on the order of these configs: the interval includes 0, so "
                f"an agreement beyond chance is not shown; a ranking made on {a} is no evidence for {b}, nor the "
                "other way (more questions narrow the interval)")

    def lines(self) -> list[str]:
        a, b = self.names
        width = max(len("config"), *(len(x) for x in self.labels))
        head = f"  {'config':{width}s}  {a + ' mean':>14s} {'rank':>4s}  {b + ' mean':>14s} {'rank':>4s}"
        out = [f"Two evaluation sets, {len(self.labels)} configs in both, {self.metric} "
               f"({a}: {self.questions[0]} questions, {b}: {self.questions[1]}):", head]
        for label in sorted(self.labels, key=lambda x: self.ranks[x][0]):
            (ma, mb), (ra, rb) = self.means[label], self.ranks[label]
            out.append(f"  {label:{width}s}  {ma:14.4f} {ra:4d}  {mb:14.4f} {rb:4d}")
        out.append(f"Kendall's tau-b {self.tau:+.3f} [{self.confidence:.0%} bootstrap over questions: "
                   f"{self.tau_low:+.3f}, {self.tau_high:+.3f}] (+1: same order, 0: unrelated, -1: reversed)")
        out.append(self.verdict())
        wa, wb = self.winners
        if wa == wb:
            out.append(f"best by mean: the same on both sets: {wa}")
        else:
            out.append(f"best by mean: {a}: {wa}, {b}: {wb}; " + "; ".join(
                f"{w} is {'in' if w in tie else 'outside'} the top tie on {other}"
                for w, tie, other in ((wa, self.ties[1], b), (wb, self.ties[0], a))))
        out.append(f"top tie (best and not significantly worse): {a}: {', '.join(self.ties[0])}; "
                   f"{b}: {', '.join(self.ties[1])}")
        if not self.flips:
            out.append(f"flips: none of the {self.pairs} pairs of configs is ordered the other way round")
        else:
            out.append(f"flips: {len(self.flips)} of {self.pairs} pairs are ordered the other way round "
                       f"(difference and {self.test} p-value, uncorrected, on each set):")
            for f in self.flips:
                noise = [n for n, p in ((a, f.p_a), (b, f.p_b)) if not p < self.alpha]
                note = f" not significant on {' and '.join(noise)}" if noise else " significant on both"
                out.append(f"  {f.first} > {f.second} on {a} ({f.diff_a:+.4f}, p {f.p_a:.4f}); "
                           f"{f.second} > {f.first} on {b} ({-f.diff_b:+.4f}, p {f.p_b:.4f});{note}")
        if self.left_out:
            out.append("left out (in one set only): " + ", ".join(f"{k} ({v})" for k, v in self.left_out.items()))
        return out

    def as_dict(self) -> dict:
        return {"names": list(self.names), "metric": self.metric, "labels": self.labels,
                "questions": list(self.questions), "means": self.means, "ranks": self.ranks, "tau": self.tau,
                "tau_interval": [self.tau_low, self.tau_high], "confidence": self.confidence,
                "agreement": self.agreement,
                "winners": list(self.winners), "ties": [list(t) for t in self.ties],
                "flips": [vars(f) for f in self.flips], "left_out": self.left_out}


def _ranks(means: np.ndarray) -> np.ndarray:
    """1 = the highest mean; equal means share the better rank."""
    return np.array([1 + int((means > m).sum()) for m in means])


def _p(test: str, a: np.ndarray, b: np.ndarray, n_resamples: int, seed: int) -> float:
    run = TESTS[test]
    return float((run(a, b, n_resamples, seed) if test == "randomization" else run(a, b)).p_value)


def compare_sets(a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray], *, names: tuple[str, str] = ("A", "B"),
                 metric: str = "", test: str = "randomization", correction: str = "holm", alpha: float = 0.05,
                 confidence: float = 0.95, n_resamples: int = 10_000, n_bootstrap: int = 2_000,
                 seed: int = 0) -> SetsAgreement:
    """How two evaluation sets (each: label -> per-question scores on ``metric``) rank the configs both hold."""
    labels = [label for label in a if label in b]
    left_out = {**{k: f"not in {names[1]}" for k in a if k not in b}, **{k: f"not in {names[0]}" for k in b if k not in a}}
    if len(labels) < 2:
        raise SetsError(f"the two sets share {len(labels)} config labels ({', '.join(labels) or 'none'}); "
                        "compare two sweeps of the same sweep file on two evaluation sets")
    sa = {k: np.asarray(a[k], dtype=float) for k in labels}
    sb = {k: np.asarray(b[k], dtype=float) for k in labels}
    ma, mb = config_means(sa), config_means(sb)
    low, high = tau_interval(sa, sb, confidence, n_bootstrap, seed)
    ties = []
    for scores in (sa, sb):
        ranked = rank_against_best(scores, test=test, correction=correction, alpha=alpha, n_resamples=n_resamples,
                                   seed=seed)
        ties.append([v.label for v in ranked if v.verdict != "worse"])
    index = {k: i for i, k in enumerate(labels)}
    flips = []
    for x, y in combinations(labels, 2):
        da, db = ma[index[x]] - ma[index[y]], mb[index[x]] - mb[index[y]]
        if da * db < 0:
            first, second = (x, y) if da > 0 else (y, x)
            sign = 1 if da > 0 else -1
            flips.append(Flip(first, second, sign * da, sign * db, _p(test, sa[first], sa[second], n_resamples, seed),
                              _p(test, sb[first], sb[second], n_resamples, seed)))
    flips.sort(key=lambda f: -(f.diff_a - f.diff_b))  # the widest disagreement first
    ra, rb = _ranks(ma), _ranks(mb)
    return SetsAgreement(names, metric, labels, (len(next(iter(sa.values()))), len(next(iter(sb.values())))),
                         {k: (float(ma[index[k]]), float(mb[index[k]])) for k in labels},
                         {k: (int(ra[index[k]]), int(rb[index[k]])) for k in labels},
                         kendall_tau(ma, mb), low, high, confidence, (ties[0], ties[1]), flips, left_out,
                         test, alpha)
