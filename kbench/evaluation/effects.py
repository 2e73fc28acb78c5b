"""What each factor of a grid does to a metric: main effects and two-factor interactions, from per-query scores.

A grid crosses factors (``chunk_size`` x ``rerank``): every combination of their levels is one config, scored
on the same questions. For each factor, its *main effect* of a level is the change in the metric when that
factor moves from its reference level (the first level on the axis) to this level, averaged over every level
of every other factor (a balanced average, each combination weighing the same):

    main(F: r -> l)[q] = mean over configs with F=l of score[q]  -  mean over configs with F=r of score[q]

For two factors F, G, each at a non-reference level against its reference, the *simple effects* are F's effect
at each of G's two levels (averaged over the other factors), and the *interaction* is how much they differ:

    interaction(F: r->l, G: s->m)[q] = [cell(l, m) - cell(r, m)] - [cell(l, s) - cell(r, s)]

where ``cell(f, g)`` is the mean of score[q] over configs with F=f and G=g. Zero means the two factors add up;
a positive interaction means F helps more at G=m than at G=s ("rerank adds +0.04 with chunk_size 1000, +0.00
with 400").

Every effect is a mean over questions of a per-question difference, so its interval and p-value come from
those differences (paired: each question is compared with itself): the percentile bootstrap interval of the
mean (``significance.bootstrap_ci``) and the paired t-test (``significance.paired_t_test`` on the difference
against zero). Effects need the complete grid: with a combination missing (a config failed) the averages
would compare different mixes of the other factors, so ``factor_effects`` refuses rather than print a biased
number.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from kbench.errors import UserError
from kbench.evaluation.significance import bootstrap_ci, paired_t_test


class IncompleteGridError(UserError, ValueError):
    """A combination of factor levels has no scores: effects would be biased."""


@dataclass(frozen=True)
class Effect:
    kind: str  # "main", "simple" (one factor's effect at a fixed level of another) or "interaction"
    factor: str  # the factor that moves (for an interaction: "F x G")
    change: str  # "r -> l" (for an interaction: "r -> l x s -> m")
    at: str  # for a simple effect, "G=m"; else ""
    mean: float  # mean over questions of the per-question difference
    ci_low: float
    ci_high: float
    p_value: float  # paired t-test of the per-question differences against 0 (NaN: they do not vary and are 0)
    n_queries: int

    def line(self) -> str:
        where = f" with {self.at}" if self.at else ""
        p = "n/a" if np.isnan(self.p_value) else f"{self.p_value:.3g}"
        return (f"{self.factor} {self.change}{where}: {self.mean:+.4f} [{self.ci_low:+.4f}, {self.ci_high:+.4f}] "
                f"p={p}")

    def row(self) -> dict[str, object]:
        return {"kind": self.kind, "factor": self.factor, "change": self.change, "at": self.at, "mean": self.mean,
                "ci_low": self.ci_low, "ci_high": self.ci_high, "p_value": self.p_value, "n_queries": self.n_queries}


def _effect(kind: str, factor: str, change: str, at: str, d: np.ndarray, confidence: float, n_resamples: int,
            seed: int) -> Effect:
    low, high = bootstrap_ci(d, confidence, n_resamples, seed)
    p = paired_t_test(np.zeros_like(d), d).p_value if len(d) >= 2 else float("nan")
    return Effect(kind, factor, change, at, float(d.mean()), low, high, float(p), len(d))


def _cell_mean(scores: dict[str, np.ndarray], levels: dict[str, dict[str, str]], fixed: dict[str, str]) -> np.ndarray:
    members = [label for label, lv in levels.items() if all(lv[f] == v for f, v in fixed.items())]
    return np.mean([scores[label] for label in members], axis=0)


def factor_effects(scores: dict[str, np.ndarray], levels: dict[str, dict[str, str]],
                   factors: dict[str, list[str]], *, confidence: float = 0.95, n_resamples: int = 2_000,
                   seed: int = 0) -> list[Effect]:
    """Main effects, then for each pair of factors their simple effects and interaction.

    ``scores``: per config label, one score per question (every array aligned on the same questions);
    ``levels``: per config label, its level of each factor; ``factors``: each factor's levels in axis order
    (the first is the reference). Factors with one level are no factors and are left out."""
    factors = {f: list(v) for f, v in factors.items() if len(v) >= 2}
    if not factors:
        return []
    lengths = {len(np.asarray(s)) for s in scores.values()}
    if len(lengths) != 1:
        raise ValueError(f"per-query scores of different lengths {sorted(lengths)}: align them on the same questions")
    scores = {label: np.asarray(s, dtype=float) for label, s in scores.items()}
    present = {tuple(levels[label][f] for f in factors) for label in scores}
    missing = [combo for combo in itertools.product(*factors.values()) if combo not in present]
    if missing:
        shown = ", ".join(",".join(f"{f}={v}" for f, v in zip(factors, combo)) for combo in missing[:3])
        raise IncompleteGridError(f"{len(missing)} combinations of the grid have no scores ({shown}"
                                  f"{' ...' if len(missing) > 3 else ''}); factor effects need the complete grid")
    levels = {label: levels[label] for label in scores}
    out: list[Effect] = []
    for factor, values in factors.items():
        ref = _cell_mean(scores, levels, {factor: values[0]})
        for value in values[1:]:
            d = _cell_mean(scores, levels, {factor: value}) - ref
            out.append(_effect("main", factor, f"{values[0]} -> {value}", "", d, confidence, n_resamples, seed))
    for f, g in itertools.combinations(factors, 2):
        fr, gr = factors[f][0], factors[g][0]
        for fl, gl in itertools.product(factors[f][1:], factors[g][1:]):
            simple = {}
            for gv in (gr, gl):
                d = _cell_mean(scores, levels, {f: fl, g: gv}) - _cell_mean(scores, levels, {f: fr, g: gv})
                simple[gv] = d
                out.append(_effect("simple", f, f"{fr} -> {fl}", f"{g}={gv}", d, confidence, n_resamples, seed))
            out.append(_effect("interaction", f"{f} x {g}", f"{fr} -> {fl} x {gr} -> {gl}", "",
                               simple[gl] - simple[gr], confidence, n_resamples, seed))
    return out


def effect_lines(effects: list[Effect], metric: str, indent: str = "") -> list[str]:
    """The effects as console / report lines: main effects, then each pair's simple effects and interaction."""
    if not effects:
        return []
    lines = [f"{indent}Factor effects on {metric} (mean over questions of the per-question difference, "
             "95% bootstrap interval, paired t-test p):"]
    for kind, title in (("main", "main effects (each factor from its first level, averaged over the others)"),
                        ("simple", "simple effects (one factor's change at a fixed level of another)"),
                        ("interaction", "interactions (how much the first factor's effect changes with the second; "
                                        "0: they add up)")):
        chosen = [e for e in effects if e.kind == kind]
        if chosen:
            lines.append(f"{indent}  {title}:")
            lines += [f"{indent}    {e.line()}" for e in chosen]
    return lines
