"""One pick across several evaluation sets: the config whose worst bound over the sets is smallest.

    found = recommend_across({"heading": records, "ict": records, "labelled": records}, "chunk_ndcg_at_10",
                             RecommendConfig(margin=0.01))
    found.pick, found.decided     # the one config, and whether every set decides it at the margin
    found.bounds                  # set -> config -> its bound were it the pick on that set
    found.lines()                 # the table, the pick, each set's own pick, where the sets disagree

Each set is a list of ``recommend.ConfigRecord`` (its own questions; configs matched by label, a config missing
from a set is left out and said). On each set every config's bound as the pick is computed (``bound.pick_bound``:
no config here is better than it by more than this), each set at ``alpha / S`` (Bonferroni over the S sets), so the
S statements hold together with probability at least ``1 - alpha``. A config's worst bound is its largest over the
sets: the most it may cost on the set least kind to it. The rule:

1. A config is *decided on a set* when every other config's bound against it is below the margin (``recommend``'s
   step 6 on that set, at ``alpha / S``); *decided across the sets* when it is decided on every set.
2. **The pick**: of the configs decided across the sets, the cheapest by ``recommend.cost`` (its mean over the sets;
   equal or unlogged costs go to the smaller worst bound); when none is, the config with the smallest worst bound,
   *provisional*: the line names each set that does not decide it.
3. A set *reverses* the pick when it shows another config better than the pick by more than the margin (the pick
   is ruled out by that config's bound); the pick is then never decided (a bound above the margin on that set), and
   the line names the set and the config.

Each set's own recommendation (``recommend`` at ``alpha / S``, with its guards and costs) is kept beside it
(``.per_set``): the per-set lines a sweep's MLflow run keeps, and the words for where the sets disagree on the top.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from kbench.evaluation.bound import Bound, pick_bound
from kbench.evaluation.config import RecommendConfig, parse_margin
from kbench.evaluation.recommend import ConfigRecord, Evidence, PairedT, Recommendation, recommend


@dataclass
class AcrossSets:
    names: list[str]
    labels: list[str]  # the configs every set holds, in the first set's order
    headline: str
    margin: str  # as given: "0.01" or "2%"
    alpha: float  # of the whole statement; each set's is alpha / len(names)
    bounds: dict[str, dict[str, Bound]]  # set -> config -> its bound as the pick on that set
    margins: dict[str, dict[str, dict[str, float]]]  # set -> pick -> other -> the margin in headline units
    means: dict[str, dict[str, float]]  # set -> config -> headline mean
    questions: dict[str, int]  # set -> how many questions (labelled questions under PPI)
    costs: dict[str, float]  # config -> its cost, the mean over the sets (NaN: not logged)
    cost: str
    pick: str
    per_set: dict[str, Recommendation]  # each set's own recommendation, at alpha / len(names)
    left_out: dict[str, str] = field(default_factory=dict)  # config -> the sets that lack it

    @property
    def level(self) -> float:
        """Each set's alpha: Bonferroni over the sets."""
        return self.alpha / len(self.names)

    def bound(self, label: str, name: str) -> float:
        return self.bounds[name][label].value

    def worst(self, label: str) -> float:
        """The config's largest bound over the sets."""
        return max(self.bound(label, name) for name in self.names)

    def decides(self, label: str, name: str) -> bool:
        """The set decides ``label``: every other config's bound against it is below the margin."""
        found = self.bounds[name][label]
        return all(upper < self.margins[name][label][c] for c, upper in found.advantages.items())

    @property
    def deciding(self) -> list[str]:
        """The sets that decide the pick."""
        return [name for name in self.names if self.decides(self.pick, name)]

    @property
    def decided(self) -> bool:
        """Every set decides the pick (so no set reverses it)."""
        return len(self.deciding) == len(self.names)

    def reversals(self, label: str | None = None) -> dict[str, list[str]]:
        """Set -> the configs that set shows better than ``label`` (default: the pick) by more than the margin."""
        label = label or self.pick
        out = {}
        for name in self.names:
            better = [c for c in self.labels if c != label
                      and self.bounds[name][c].advantages[label] < -self.margins[name][c][label]]
            if better:
                out[name] = better
        return out

    def tops(self) -> dict[str, str]:
        """Each set's best config by headline mean."""
        return {name: max(self.labels, key=lambda c: (self.means[name][c], -self.labels.index(c)))
                for name in self.names}

    def disagreement(self) -> list[str]:
        """Where the sets disagree on the top, in words: each set's best by mean when they differ, how far behind
        it the other sets' tops are there, and every reversal of the pick."""
        tops = self.tops()
        out = []
        if len(set(tops.values())) > 1:
            out.append("the sets disagree on the top: " + "; ".join(f"{name} puts {top} first"
                                                                   for name, top in tops.items()))
            for name, top in tops.items():
                behind = [f"{other} {self.means[name][other] - self.means[name][top]:+.4f}"
                          for other in dict.fromkeys(tops.values()) if other != top]
                out.append(f"  on {name}, behind {top}: " + ", ".join(behind))
        else:
            out.append(f"the sets agree on the top by mean: {next(iter(tops.values()))}")
        for name, better in self.reversals().items():
            out.append(f"  {name} reverses the pick: it shows {', '.join(better)} better than {self.pick} by more "
                       f"than the {self.margin} margin")
        return out

    def verdict(self) -> str:
        worst = self.worst(self.pick)
        statement = (f"no config here is better than it by more than {worst:.4f} on {self.headline} on any of the "
                     f"{len(self.names)} sets ({1 - self.alpha:.0%}, Bonferroni over the sets and the configs)")
        if self.decided:
            decided_too = [c for c in self.labels if c != self.pick and all(self.decides(c, n) for n in self.names)]
            also = (f"; also decided on every set: {', '.join(decided_too)} ({self.cost} "
                    + ", ".join(_number(self.costs[c]) for c in decided_too) + ")") if decided_too else ""
            return (f"recommendation across sets: {self.pick} (decided on every set at the {self.margin} margin: "
                    f"{statement}; {self.cost} {_number(self.costs[self.pick])}{also})")
        open_sets = [n for n in self.names if n not in self.deciding]
        return (f"recommendation across sets: provisional: {self.pick} (the smallest worst bound: {statement}); "
                f"the sets cannot decide it at the {self.margin} margin: {', '.join(open_sets)} "
                f"{'does' if len(open_sets) == 1 else 'do'} not")

    def table(self) -> list[str]:
        width = max(len("config"), *(len(c) for c in self.labels))
        cells = [f"{name} bound" for name in self.names]
        head = f"  {'config':{width}s}  " + "  ".join(f"{c:>{max(len(c), 9)}s}" for c in cells) + "      worst"
        out = [head]
        for label in sorted(self.labels, key=lambda c: (self.worst(c), self.labels.index(c))):
            row = []
            for name, cell in zip(self.names, cells):
                mark = "*" if self.per_set[name].config == label else " "
                row.append(f"{self.bound(label, name):>{max(len(cell), 9) - 1}.4f}{mark}")
            out.append(f"  {label:{width}s}  " + "  ".join(row) + f"  {self.worst(label):9.4f}"
                       + ("  <- the pick" if label == self.pick else ""))
        return out

    def lines(self) -> list[str]:
        sizes = ", ".join(f"{name}: {self.questions[name]} questions" for name in self.names)
        out = [f"Across {len(self.names)} sets ({sizes}), {len(self.labels)} configs in every set, {self.headline}: "
               f"each config's bound were it the pick (no config better than it by more than this), each set at "
               f"alpha {self.alpha:g}/{len(self.names)} = {self.level:.3g} (Bonferroni over the sets):"]
        out += self.table()
        out.append("  (* that set's own pick)")
        out.append(self.verdict())
        for name in self.names:
            own = self.per_set[name]
            state = "decides" if self.decides(self.pick, name) else "does not decide"
            out.append(f"  {name}: {state} {self.pick} (bound {self.bound(self.pick, name):.4f}); its own pick: "
                       f"{own.config}, {'decided' if own.decided else 'provisional'} (bound {own.bound:.4f})")
        out += self.disagreement()
        for name in self.names:
            evidence = self.per_set[name].evidence
            out += [f"  warning on {self.pick} ({name}): {w}" for w in evidence.warnings.get(self.pick, ())]
            if evidence.corpus:
                out.append(f"  {name}'s documents: {evidence.corpus}")
        if self.left_out:
            out.append("left out (not in every set): " + ", ".join(f"{k} ({v})" for k, v in self.left_out.items()))
        return out

    def set_lines(self) -> dict[str, list[str]]:
        """Each set's own recommendation lines (at alpha / S): what the MLflow run keeps per set."""
        return {name: found.lines() for name, found in self.per_set.items()}

    def as_dict(self) -> dict:
        return {"pick": self.pick, "decided": self.decided, "deciding": self.deciding, "sets": self.names,
                "headline": self.headline, "margin": self.margin, "alpha": self.alpha, "alpha_per_set": self.level,
                "bounds": {n: {c: self.bound(c, n) for c in self.labels} for n in self.names},
                "worst": {c: self.worst(c) for c in self.labels}, "questions": self.questions,
                "means": self.means, "costs": self.costs, "tops": self.tops(), "reversals": self.reversals(),
                "per_set": {n: r.as_dict() for n, r in self.per_set.items()}, "left_out": self.left_out,
                "lines": self.lines()}


def _number(x: float) -> str:
    if math.isnan(x):
        return "not logged"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.4g}"


def recommend_across(sets: Mapping[str, list[ConfigRecord]], headline: str, config: RecommendConfig | None = None,
                     *, alpha: float = 0.05, estimator: PairedT | None = None,
                     evidence: Mapping[str, Evidence] | None = None) -> AcrossSets:
    """The one pick over ``sets`` (name -> records, two or more sets, two or more configs in every set);
    ``config``: the margin, the cost and each set's guards and budgets (default ``RecommendConfig()``);
    ``evidence``: each set's (``recommend.Evidence``)."""
    config = config or RecommendConfig()
    estimator = estimator or PairedT()
    names = list(sets)
    if len(names) < 2:
        raise ValueError(f"a decision across sets needs at least 2 sets, got {len(names)}")
    by_set = {name: {r.label: r for r in records} for name, records in sets.items()}
    labels = [r.label for r in sets[names[0]] if all(r.label in by_set[n] for n in names)]
    left_out = {}
    for name in names:
        for r in sets[name]:
            if r.label not in labels and r.label not in left_out:
                left_out[r.label] = "only in " + ", ".join(n for n in names if r.label in by_set[n])
    if len(labels) < 2:
        raise ValueError(f"the sets share {len(labels)} config labels ({', '.join(labels) or 'none'}); give sweeps "
                         "of the same sweep file on each set")
    level = alpha / len(names)
    value, relative = parse_margin(config.margin)
    bounds, margins, means, questions, per_set = {}, {}, {}, {}, {}
    for name in names:
        records = [by_set[name][c] for c in labels]
        means[name] = {c: estimator.mean(by_set[name][c], headline) for c in labels}
        amount = {c: value * abs(means[name][c]) if relative else value for c in labels}
        bounds[name] = {c.label: pick_bound(c, [o for o in records if o is not c], headline, estimator=estimator,
                                            alpha=level) for c in records}
        margins[name] = {p: {c: amount[c] for c in labels if c != p} for p in labels}
        questions[name] = estimator.questions(records[0], headline)
        per_set[name] = recommend(records, headline, config, alpha=level, estimator=estimator,
                                  evidence=(evidence or {}).get(name),
                                  confidence=f"{1 - alpha:.0%} over the {len(names)} sets")
    costs = {c: float(np.mean([float(by_set[n][c].values.get(config.cost, math.nan)) for n in names])) for c in labels}
    found = AcrossSets(names, labels, headline, config.margin_text(), alpha, bounds, margins, means, questions, costs,
                       config.cost, labels[0], per_set, left_out)
    worst = {c: found.worst(c) for c in labels}
    rank = {c: i for i, c in enumerate(labels)}
    price = {c: math.inf if math.isnan(costs[c]) else costs[c] for c in labels}
    everywhere = [c for c in labels if all(found.decides(c, n) for n in names)]
    if everywhere:
        found.pick = min(everywhere, key=lambda c: (price[c], worst[c], rank[c]))
    else:
        found.pick = min(labels, key=lambda c: (worst[c], price[c], rank[c]))
    return found
