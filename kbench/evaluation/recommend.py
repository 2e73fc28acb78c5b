"""One recommendation from a set of configs: the best by mean, unless a cheaper config is shown to be as good
within a stated margin; and whether the set of questions decides it.

    from kbench.evaluation.recommend import ConfigRecord, RecommendConfig, recommend
    records = [ConfigRecord("fixed", per_query={"chunk_ndcg_at_10": array, "latency_ms_total": array, ...},
                            values={"cost_index_bytes": 1.5e6}), ...]
    found = recommend(records, headline="chunk_ndcg_at_10", config=RecommendConfig(margin=0.01))
    found.config      # the recommended label (None only when a budget excludes every config)
    found.decided     # shown within the margin of every other config on the headline
    found.undecided   # when not: the configs it is not shown within the margin of
    found.bound       # no config here is better than the pick by more than this (headline units, 95%)
    found.ruled_out   # the configs shown worse than the pick by more than the margin
    found.lines()     # "recommendation: ..." and the lines saying why

A plain function over plain records, so every way of searching configs (a grid sweep, ``kbench compare``, a
race, a stage-wise search) ends with the same recommendation from the same numbers. The rule:

1. **Metrics**: the headline (what configs are ranked on: nDCG@10 of the finest level) and every guard of
   ``recommend.guards`` (default: doc and chunk nDCG@10 and recall@10 of the headline's level), all quality
   metrics, higher is better. A guard without a level (``recall_at_10``) takes the headline's; a guard the
   records do not measure is left out, and the lines say so.
2. **Budgets**: a config whose p95 latency of ``recommend.latency_stage`` (per-query ``latency_ms_<stage>``)
   is above ``recommend.latency_budget_ms``, or whose ``recommend.cost`` is above ``recommend.cost_budget``, is
   excluded, and the lines name it and why. Latency is a budget, never a tie: it does not decide quality.
3. **The best**: the config left with the highest headline mean.
4. **Within the margin**: a config other than the best whose one-sided lower confidence bound of
   mean(config - best) is above -margin (``recommend.margin``: absolute, default 0.01, or relative to the best's
   mean, ``"2%"``) on the headline and on every guard. One p-value per config, of H0: mean(config - best) <=
   -margin: the paired t-test's (``significance.non_inferiority``), the largest over its metrics (every metric
   must pass, so no correction across metrics), corrected over the configs by Holm.
5. **Recommended**: of the best and the configs shown within its margin, the cheapest by ``recommend.cost``
   (default ``cost_index_bytes``: the bytes of the run's chunk vectors, the same on every machine); equal
   costs, or none logged, go to the better headline mean, never to a latency.
6. **Decided**: the recommended config is shown within the margin of every other config left on the headline
   (the same test with it as the candidate, each at ``alpha / k`` over the k others: Bonferroni, so the statement
   holds for a pick the data chose, see ``evaluation.bound``; the guards have done their part in step 4: a config
   ahead on a guard but behind on the headline is a trade-off the headline settles). Otherwise the
   recommendation is *provisional*, and the line says which configs it cannot be told apart from, the set's
   minimum detectable difference and how many questions would decide at the margin. "Not significantly worse"
   is never read as "as good".
7. **The bound** (``evaluation.bound.pick_bound``): the same k one-sided bounds read as numbers. No config here is
   better than the pick by more than ``bound`` (the smallest margin at which step 6 decides); the configs whose
   bound lies below minus the margin are *ruled out*: shown worse than the pick by more than the margin. Every
   recommendation states its bound, decided or not: it is what a provisional pick may cost.

The means and the tests come from an ``Estimator``: by default ``PairedT`` (each record's per-query scores are
the truth; the paired t-test above). ``kbench.labelling`` passes a PPI estimator instead
(``kbench.evaluation.ppi.PPIEstimator``: human labels on a random share of the questions, a model's labels on
all of them), so the same rule decides on intervals that carry the model's error.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from kbench.errors import ConfigError
from kbench.evaluation.bound import Bound, pick_bound
from kbench.evaluation.config import DEFAULT_COST, DEFAULT_GUARDS, LEVELS, RecommendConfig, parse_margin
from kbench.evaluation.directions import lower_is_better
from kbench.evaluation.significance import (NonInferiority, adjust_p_values, minimum_detectable_difference,
                                            non_inferiority, questions_to_decide)

POWER = 0.8  # of the questions-to-decide calculation, as the minimum detectable difference kbench reports
SHOWN = 4  # configs named in one line before "..."


@dataclass(frozen=True)
class ConfigRecord:
    """One config as the recommendation sees it. ``per_query``: a column name -> one value per question, the
    same questions in the same order in every record. ``values``: run-level numbers (costs, logged p95s)."""

    label: str
    per_query: Mapping[str, np.ndarray]
    values: Mapping[str, float] = field(default_factory=dict)


class PairedT:
    """The default estimator: a record's per-query scores are the truth; means are plain means and a config is
    tested against a reference by the paired t-test (``significance.non_inferiority``)."""

    questions_word = "questions"

    def mean(self, record: ConfigRecord, metric: str) -> float:
        return float(np.mean(record.per_query[metric]))

    def versus(self, candidate: ConfigRecord, reference: ConfigRecord, metric: str, margin: float,
               alpha: float) -> NonInferiority:
        """The test of mean(candidate - reference) against -margin."""
        return non_inferiority(reference.per_query[metric], candidate.per_query[metric], margin, alpha)

    def questions(self, record: ConfigRecord, metric: str) -> int:
        """How many questions the tests rest on."""
        return len(np.asarray(record.per_query[metric]))


@dataclass
class Versus:
    """One config tested against a reference on every metric: shown within the margin of it, or not."""

    label: str
    reference: str
    tests: dict[str, NonInferiority]  # metric -> the test of mean(label - reference) against -margin
    p_value: float  # the largest over the metrics: H0 is that it is more than the margin worse on any of them
    p_adjusted: float  # corrected over the configs of its family (Holm in step 4, Bonferroni in step 6)
    shown: bool

    @property
    def weakest(self) -> str:
        """The metric with the largest p-value: the one that keeps it from being shown, when it is not."""
        return max(self.tests, key=lambda m: self.tests[m].p_value)


@dataclass(frozen=True)
class Evidence:
    """What a recommendation rests on beside the scores, for its lines: the set, what its documents can still give,
    how its corpus was altered and the warnings that bear on a config. Every field is optional: a recommendation
    from plain records knows none of them."""

    set_name: str = ""
    available: int | None = None  # questions the set's documents can give (a generated set); None: unknown
    corpus: str = ""  # how the indexed documents differ from the source documents, in words ("" : they do not)
    warnings: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # label -> warnings bearing on it
    sweep: str | None = None  # the sweep's parent run id, for the next step's commands
    sweep_args: str | None = None  # the sweep's config file and --set overrides (for `kbench sweep ...`)
    rests_on: str = ""  # the kind of questions, and their distance from a query log when measured (evalsets.match)


@dataclass
class Recommendation:
    config: str | None
    best: str | None  # the highest headline mean among the configs within the budgets
    headline: str
    metrics: list[str]  # the metrics the margin holds on, headline first
    margin: str  # as given: "0.01" or "2%"
    means: dict[str, dict[str, float]]  # metric -> label -> mean
    order: list[str]  # the configs within the budgets, headline mean best first
    versus_best: dict[str, Versus]  # each config but the best against the best (step 4)
    versus_pick: dict[str, Versus]  # the recommended config against each other config, on the headline (step 6)
    cost: str
    costs: dict[str, float]  # label -> cost (NaN: not logged)
    latency: dict[str, float]  # label -> p95 latency of the budget's stage, ms (NaN: not measured)
    n_questions: int
    alpha: float = 0.05
    excluded: dict[str, str] = field(default_factory=dict)  # label -> why (over a budget)
    left_out: dict[str, str] = field(default_factory=dict)  # a guard or the cost -> why it was left out
    budgets: list[str] = field(default_factory=list)  # the budgets applied, as text
    questions_word: str = "questions"  # what n_questions counts ("human-labelled questions" under PPI)
    bounds: Bound | None = None  # the pick's bound (step 7): each other config's advantage over it, bounded
    shown_worse: list[str] = field(default_factory=list)  # configs shown worse than the best (the ranking's test)
    evidence: Evidence = field(default_factory=Evidence)
    latency_stage: str = "total"  # the stage the latency budget holds
    without_stage: list[str] = field(default_factory=list)  # configs without that stage: 0 ms of it counted

    @property
    def within_margin(self) -> list[str]:
        """The best and every config shown within the margin of it, in headline order."""
        if self.best is None:
            return []
        return [label for label in self.order if label == self.best or self.versus_best[label].shown]

    @property
    def decided(self) -> bool:
        """The recommended config is shown within the margin of every other config on the headline (vacuously
        with one)."""
        return self.config is not None and all(v.shown for v in self.versus_pick.values())

    @property
    def undecided(self) -> list[str]:
        """The configs the recommended one is not shown within the margin of, in headline order."""
        return [label for label in self.order if label in self.versus_pick and not self.versus_pick[label].shown]

    @property
    def bound(self) -> float:
        """No config here is better than the recommended one by more than this on the headline (in its units, at
        1 - alpha, simultaneous over the others); the smallest margin at which the set decides this pick. NaN with
        no other config to compare."""
        return self.bounds.value if self.bounds is not None else math.nan

    @property
    def ruled_out(self) -> list[str]:
        """The configs shown worse than the recommended one by more than the margin (the bound's own test), in
        headline order."""
        if self.bounds is None:
            return []
        out = set(self.bounds.ruled_out({c: v.tests[self.headline].margin for c, v in self.versus_pick.items()}))
        return [label for label in self.order if label in out]

    @property
    def mde(self) -> float:
        """The set's minimum detectable difference on the headline, the one every line names: the two-sided paired
        test's at 80% power, from each config's differences with the pick, the largest over the configs the pick is
        not shown within the margin of (over every other config when it is decided)."""
        family = [self.versus_pick[c] for c in self.undecided] or list(self.versus_pick.values())
        values = [minimum_detectable_difference(v.tests[self.headline].sd, v.tests[self.headline].n, self.alpha)
                  for v in family]
        return max(values) if values else math.nan

    @property
    def cheaper_unresolved(self) -> list[str]:
        """Configs cheaper than the recommended one that the set leaves open: not shown within the margin of the
        best, not shown worse than the best (``shown_worse``: the ranking's test), not ruled out, and within the
        set's minimum detectable difference (``mde``) of the best on the headline. They may be as good."""
        if self.config is None:
            return []
        price = _price(self.costs.get(self.config, math.nan))
        mde, ruled_out = self.mde, set(self.ruled_out)
        out = []
        for label in self.order:
            if (label == self.best or self.versus_best[label].shown or _price(self.costs[label]) >= price
                    or label in self.shown_worse or label in ruled_out):
                continue
            if abs(self.versus_best[label].tests[self.headline].difference) < mde:
                out.append(label)
        return out

    @property
    def reason(self) -> str:
        """Why, in one sentence: the recommendation line without its prefix."""
        return self._verdict().removeprefix("recommendation: ")

    @property
    def tie(self) -> list[str]:  # kept for callers of the old record: the configs shown within the margin
        return self.within_margin

    @property
    def warnings(self) -> list[str]:
        """The warnings that bear on the recommended config (its language coverage, its analyzer's language)."""
        return list(self.evidence.warnings.get(self.config, ())) if self.config else []

    def lines(self) -> list[str]:
        out = [self._verdict()]
        if self.config is not None:
            if self.bounds is not None and self.bounds.comparisons:
                out.append(self.bound_line())
            others = [c for c in self.within_margin if c != self.config]
            if others:
                out.append("  also within the margin of the best: " + _names(
                    [f"{c} ({'the best itself, ' if c == self.best else ''}{self.cost} {_number(self.costs[c])})"
                     for c in others]))
            cheaper = self.cheaper_unresolved
            if cheaper:
                out.append(f"  cheaper and left open by the set: not shown within the margin of the best, nor worse "
                           f"than it, and within the minimum detectable difference ({self.mde:.4f}): "
                           f"{self._versus_text(cheaper, self.versus_best)}; "
                           + self._questions_text(cheaper, self.versus_best) + " (they may be as good: the set "
                           "cannot tell)")
            if not self.decided:
                out.append(self.next_step())
            out += [f"  warning on {self.config}: {w}" for w in self.warnings]
        if self.evidence.corpus:
            out.append(f"  the set's documents: {self.evidence.corpus}")
        if self.evidence.rests_on:
            out.append(f"  {self.evidence.rests_on}")
        if self.without_stage:
            out.append(f"  no {self.latency_stage} stage in {_names(self.without_stage)}: 0 ms of it counted "
                       "against the latency budget")
        if self.excluded:
            out.append("  excluded: " + "; ".join(f"{label} ({why})" for label, why in self.excluded.items()))
        if self.left_out:
            out.append("  left out: " + "; ".join(f"{m} ({why})" for m, why in self.left_out.items()))
        return out

    def bound_line(self) -> str:
        """``  bound: no config here is better than X by more than 0.0312 on ... (95%, ...); ruled out: a, b``."""
        ruled = self.ruled_out
        shown = (f"ruled out (shown worse than it by more than the {self.margin} margin): {_names(ruled)}" if ruled
                 else f"ruled out: none (no config is shown worse than it by more than the {self.margin} margin)")
        if max(self.bounds.advantages.values()) < 0:
            return (f"  bound: 0: every other config is shown worse than {self.config} on {self.headline} "
                    f"({self.bounds.words()}), so the set decides it at any margin; {shown}")
        return (f"  bound: no config here is better than {self.config} by more than {self.bound:.4f} on "
                f"{self.headline} ({self.bounds.words()}), so the set decides it at any margin above that; {shown}")

    def margin_to_decide(self) -> float | None:
        """The bound rounded up to 4 decimals (a margin the set decides this pick at), or None at 1 or more."""
        bound = self.bound
        if not math.isfinite(bound):
            return None
        margin = math.floor(bound * 1e4) / 1e4 + 1e-4
        return margin if margin < 1 else None

    def next_step(self) -> str:
        """What would decide a provisional pick, with its command: more questions when the documents can give them
        (``kbench sweep --until-decided``), else labels of real questions, a margin at the bound, more documents."""
        sweep, args = self.evidence.sweep, self.evidence.sweep_args
        needed = self._needed(self.undecided, self.versus_pick)
        available = self.evidence.available
        margin = self.margin_to_decide()
        if margin is None:
            wider = ""
        elif sweep is None and args:  # a search logs no runs per config to compare again: run it at that margin
            wider = f"decide at the bound as the margin (kbench sweep {args} --set recommend.margin={margin:.4f})"
        else:
            wider = (f"decide at the bound as the margin (kbench compare --sweep {sweep or 'PARENT'} "
                     f"--margin {margin:.4f})")
        label = (f"label questions by hand (kbench label --sweep {sweep})" if sweep else
                 "label questions by hand (kbench label --sweep PARENT, on a grid sweep's runs)")
        if available is not None and needed is not None and self.n_questions < needed <= available:
            config = self.evidence.sweep_args or "CONFIG"
            return (f"  next: the documents give up to {available:,} questions, enough for the about {needed:,} that "
                    f"would decide: grow the set until it decides (kbench sweep {config} --until-decided "
                    f"--max-questions {needed}), or {wider or label}")
        if available is not None:
            short = (f"fewer than the about {needed:,} that would decide at the {self.margin} margin" if needed
                     else f"and no number of questions decides at a zero margin")
            return (f"  next: the documents give at most {available:,} questions, {short}; {label}, "
                    + (f"{wider}, " if wider else "") + "or add documents")
        return f"  next: {label}" + (f", or {wider}" if wider else "") + ", or add questions"

    def _verdict(self) -> str:
        names = ", ".join(self.metrics)
        if self.config is None:
            return f"recommendation: none: every config is over a budget ({'; '.join(self.budgets)})"
        if len(self.order) == 1:
            return f"recommendation: {self.config} (the only config within the budgets: {'; '.join(self.budgets)})"
        head = self.means[self.headline]
        if self.config == self.best:
            why = f"the best on {self.headline}, {head[self.config]:.4f}"
        else:
            tests = self.versus_best[self.config].tests
            n = len(self.within_margin)
            why = (f"within the {self.margin} margin of the best, {self.best}, on {names}: {self.headline} "
                   f"{head[self.config]:.4f} against {head[self.best]:.4f}, lower bound "
                   f"{tests[self.headline].lower_bound:+.4f}; the cheapest of {n} such configs: {self.cost} "
                   f"{_number(self.costs[self.config])}")
        if self.decided:
            return (f"recommendation: {self.config} ({why}; shown within the {self.margin} margin of every other "
                    f"config on {self.headline}, {self.n_questions} {self.questions_word})")
        return (f"recommendation: provisional: {self.config} ({why}); the set cannot decide: it is not shown within "
                f"the {self.margin} margin of {_names(self.undecided)} (the set's minimum detectable difference on "
                f"{self.headline} is {self.mde:.4f} at {self.n_questions} {self.questions_word}; "
                f"{self._questions_text(self.undecided, self.versus_pick)})")

    def _versus_text(self, labels: list[str], family: dict[str, Versus]) -> str:
        return _names([f"{c} ({self.cost} {_number(self.costs[c])}; {self.headline} "
                       f"{family[c].tests[self.headline].difference:+.4f}, lower bound "
                       f"{family[c].tests[self.headline].lower_bound:+.4f})" for c in labels])

    @property
    def questions_to_decide(self) -> int | None:
        """About how many questions (``questions_word``) would decide this pick against the configs it is not yet
        shown within the margin of (0: decided; None: no number decides, a zero margin)."""
        return 0 if self.decided else self._needed(self.undecided, self.versus_pick)

    def _needed(self, labels: list[str], family: dict[str, Versus]) -> int | None:
        """How many questions would show configs equal within the margin (80% power, true difference 0, alpha
        shared out over the family by Bonferroni, the largest over the labels and metrics); None: no number (a
        zero margin)."""
        level = self.alpha / max(len(family), 1)
        needed = [questions_to_decide(t.sd, t.margin, level, POWER) for c in labels for t in family[c].tests.values()]
        if not needed or any(n is None for n in needed):
            return None
        return max(needed)

    def _questions_text(self, labels: list[str], family: dict[str, Versus]) -> str:
        needed = self._needed(labels, family)
        if needed is None:
            return "no number of questions shows configs equal at a zero margin"
        return (f"if they are truly equal, about {needed:,} {self.questions_word} would show it at the {self.margin} "
                "margin")

    def as_dict(self) -> dict:
        return {"config": self.config, "decided": self.decided, "best": self.best, "headline": self.headline,
                "metrics": self.metrics, "margin": self.margin, "within_margin": self.within_margin,
                "undecided": self.undecided, "cheaper_unresolved": self.cheaper_unresolved,
                "bound": None if math.isnan(self.bound) else self.bound, "ruled_out": self.ruled_out,
                "advantages": dict(self.bounds.advantages) if self.bounds else {},
                "bound_confidence": self.bounds.words() if self.bounds else None,
                "mde": None if math.isnan(self.mde) else self.mde, "shown_worse": self.shown_worse,
                "warnings": self.warnings, "set": self.evidence.set_name, "available": self.evidence.available,
                "corpus": self.evidence.corpus, "rests_on": self.evidence.rests_on,
                "excluded": self.excluded, "cost": self.cost, "costs": self.costs, "latency_p95_ms": self.latency,
                "left_out": self.left_out, "questions": self.n_questions, "lines": self.lines()}


def _price(cost: float) -> float:
    return math.inf if math.isnan(cost) else cost


def _names(items: list[str]) -> str:
    return ", ".join(items[:SHOWN]) + (f" and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def _number(x: float) -> str:
    if math.isnan(x):
        return "not logged"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.4g}"


def resolve_metrics(headline: str, guards: list[str]) -> list[str]:
    """The headline, then each guard with the headline's level put in front of a level-less name; no repeats."""
    level = headline.split("_", 1)[0] if headline.split("_", 1)[0] in LEVELS else None
    out = [headline]
    for guard in guards:
        name = guard
        if level and guard.split("_", 1)[0] not in LEVELS:
            name = f"{level}_{guard}"
        if name not in out:
            out.append(name)
    return out


def p95_latency(record: ConfigRecord, stage: str) -> float:
    """The stage's p95 latency in ms: from the per-query column when there, else the logged metric; 0 for a
    stage the config does not have (its whole search was timed, this stage was not in it); NaN if not measured.
    A stage no config of a recommendation has is refused before this is read (``names_problem``)."""
    column = f"latency_ms_{stage}"
    if column in record.per_query:
        return float(np.percentile(np.asarray(record.per_query[column], dtype=float), 95))
    if f"{column}_p95" in record.values:
        return float(record.values[f"{column}_p95"])
    if stage != "total" and "total" in timed_stages(record):
        return 0.0
    return math.nan


def timed_stages(record: ConfigRecord) -> list[str]:
    """The stages whose per-query latency the record holds (``latency_ms_<stage>``, or its logged ``_p95``)."""
    stages = [c.removeprefix("latency_ms_") for c in record.per_query if c.startswith("latency_ms_")]
    stages += [m.removeprefix("latency_ms_").removesuffix("_p95") for m in record.values
               if m.startswith("latency_ms_") and m.endswith("_p95")]
    return list(dict.fromkeys(stages))


def names_problem(records: list[ConfigRecord], config: RecommendConfig) -> str | None:
    """Why ``config`` names what none of ``records`` measures (a rule that would hold nothing), or None: a guard
    given (not the defaults) that no record scores, a cost given that no record logs, a budget's stage no record
    times while they time others. The defaults, missing, are left out and the lines say so."""
    if config.guards != DEFAULT_GUARDS:
        scored = set().union(*(r.per_query for r in records))
        level = next((lv for lv in LEVELS if any(c.startswith(f"{lv}_") for c in scored)), None)
        missing = [g for g in config.guards if g not in scored and not any(f"{lv}_{g}" in scored for lv in LEVELS)]
        if missing:
            quality = sorted(c for c in scored if not lower_is_better(c))
            return (f"recommend.guards: {', '.join(missing)}: no config here is scored on "
                    f"{'it' if len(missing) == 1 else 'them'}; these runs score {_names(quality)}"
                    + (f" (a name without its level takes the headline's: {level}_...)" if level else ""))
    if config.cost != DEFAULT_COST and not any(config.cost in r.values for r in records):
        logged = sorted({m for r in records for m in r.values if lower_is_better(m)})
        return (f"recommend.cost: no config here logged {config.cost}; these runs log "
                f"{', '.join(logged[:12]) + (' ...' if len(logged) > 12 else '') or 'no cost'}")
    if config.latency_budget_ms is not None and config.latency_stage != "total":
        timed = list(dict.fromkeys(stage for r in records for stage in timed_stages(r)))
        if timed and config.latency_stage not in timed:
            return (f"recommend.latency_stage: no config here has the stage {config.latency_stage!r}, so the "
                    f"{config.latency_budget_ms:g} ms budget would hold nothing; these runs time {', '.join(timed)}")
    return None


def versus(candidate: ConfigRecord, reference: ConfigRecord, metrics: list[str], margin: tuple[float, bool],
           alpha: float, estimator: PairedT | None = None) -> Versus:
    """``candidate`` tested against ``reference`` on every metric (the margin relative to the reference's mean
    when it is a share); its p-value is the largest of the metrics'."""
    estimator = estimator or PairedT()
    value, relative = margin
    tests = {}
    for metric in metrics:
        amount = value * abs(estimator.mean(reference, metric)) if relative else value
        tests[metric] = estimator.versus(candidate, reference, metric, amount, alpha)
    p = max(t.p_value for t in tests.values())
    return Versus(candidate.label, reference.label, tests, p, math.nan, False)


def family(candidates: list[ConfigRecord], reference: ConfigRecord, metrics: list[str], margin: tuple[float, bool],
           alpha: float, *, as_reference: bool = False, estimator: PairedT | None = None,
           correction: str = "holm") -> dict[str, Versus]:
    """Each candidate against ``reference`` (or, ``as_reference``, the reference against each), ``correction`` over
    them (Holm for step 4; Bonferroni for step 6, whose reference the data chose)."""
    found = [versus(reference, c, metrics, margin, alpha, estimator) if as_reference
             else versus(c, reference, metrics, margin, alpha, estimator) for c in candidates]
    adjusted = adjust_p_values(np.array([v.p_value for v in found]), correction) if found else []
    out = {}
    for c, v, q in zip(candidates, found, adjusted):
        v.p_adjusted, v.shown = float(q), bool(q < alpha)
        out[c.label] = v
    return out


def recommend(records: list[ConfigRecord], headline: str, config: RecommendConfig | None = None, *,
              alpha: float = 0.05, estimator: PairedT | None = None, shown_worse: list[str] | None = None,
              evidence: Evidence | None = None, confidence: str = "") -> Recommendation:
    """The recommendation over ``records`` (two or more configs, each with the same questions in the same
    order; ``config``: margin, guards, cost and budgets, default ``RecommendConfig()``; ``alpha``: of every
    test, as the comparison that ranked them). Returns a plain record: ``.config`` (the label, or None when a
    budget excludes every config), ``.decided``, ``.undecided``, ``.bound``, ``.ruled_out``, ``.reason`` (one
    sentence), ``.lines()``. ``estimator``: where the means and tests come from (default ``PairedT``; a PPI
    estimator under human labels). ``shown_worse``: the configs a ranking shown beside the recommendation calls
    worse than the best (``kbench compare``'s test), so no line calls one of them possibly as good; by default, the
    configs the best's own bound shows worse than it. ``evidence``: the set, its available questions, its corpus,
    the warnings (``Evidence``). ``confidence``: the bound's confidence in words when it is not ``1 - alpha`` (a sequential
    sweep's "95% over every look")."""
    config = config or RecommendConfig()
    estimator = estimator or PairedT()
    if len(records) < 2:
        raise ValueError(f"a recommendation compares at least 2 configs, got {len(records)}")
    if headline not in records[0].per_query:
        raise ValueError(f"the headline metric {headline!r} has no per-query scores")
    if lower_is_better(headline):
        raise ValueError(f"the headline {headline!r} is a latency or a cost; a recommendation is headed by a "
                         "quality metric (nDCG@10, recall@10, ...)")
    if problem := names_problem(records, config):
        raise ConfigError(problem)
    metrics, left_out = [], {}
    for metric in resolve_metrics(headline, config.guards):
        missing = [r.label for r in records if metric not in r.per_query]
        if missing:
            left_out[metric] = ("not measured by these runs" if len(missing) == len(records)
                                else f"not measured by {', '.join(missing[:3])}")
            continue
        metrics.append(metric)
    n = estimator.questions(records[0], headline)
    costs = {r.label: float(r.values.get(config.cost, math.nan)) for r in records}
    latency = {r.label: p95_latency(r, config.latency_stage) for r in records}
    if all(math.isnan(c) for c in costs.values()):
        left_out[config.cost] = "not logged by these runs: the better headline mean decides"
    excluded, budgets = {}, []
    if config.latency_budget_ms is not None:
        budgets.append(f"p95 latency of {config.latency_stage} at most {config.latency_budget_ms:g} ms")
        for label, ms in latency.items():
            if math.isnan(ms):
                excluded[label] = f"latency_ms_{config.latency_stage} not measured, so the budget cannot be checked"
            elif ms > config.latency_budget_ms:
                excluded[label] = f"p95 {ms:.2f} ms over the {config.latency_budget_ms:g} ms budget"
    if config.cost_budget is not None:
        budgets.append(f"{config.cost} at most {_number(config.cost_budget)}")
        for label, cost in costs.items():
            if label in excluded:
                continue
            if math.isnan(cost):
                excluded[label] = f"{config.cost} not logged, so the budget cannot be checked"
            elif cost > config.cost_budget:
                excluded[label] = f"{config.cost} {_number(cost)} over the {_number(config.cost_budget)} budget"
    kept = [r for r in records if r.label not in excluded]
    means = {m: {r.label: estimator.mean(r, m) for r in records} for m in metrics}
    order = sorted((r.label for r in kept), key=lambda label: -means[headline][label])  # stable on equal means
    found = Recommendation(None, order[0] if order else None, headline, metrics, config.margin_text(), means, order,
                           {}, {}, config.cost, costs, latency, n, alpha, excluded, left_out, budgets,
                           estimator.questions_word, evidence=evidence or Evidence())
    found.latency_stage = config.latency_stage
    if config.latency_budget_ms is not None and config.latency_stage != "total":
        found.without_stage = [r.label for r in records if config.latency_stage not in timed_stages(r)
                               and latency[r.label] == 0.0]
    if not kept:
        return found
    by_label = {r.label: r for r in kept}
    margin = parse_margin(config.margin)
    best = by_label[order[0]]
    found.versus_best = family([by_label[c] for c in order[1:]], best, metrics, margin, alpha, estimator=estimator)
    rank = {label: i for i, label in enumerate(order)}
    found.config = min(found.within_margin, key=lambda c: (_price(costs[c]), rank[c]))  # then the better mean
    pick = by_label[found.config]
    others = [by_label[c] for c in order if c != found.config]
    found.versus_pick = family(others, pick, [headline], margin, alpha, as_reference=True, estimator=estimator,
                               correction="bonferroni")
    if others:
        found.bounds = pick_bound(pick, others, headline, estimator=estimator, alpha=alpha, confidence=confidence)
    if shown_worse is None:  # the best's own bounds: a config whose advantage over the best is below 0
        shown_worse = ([] if len(order) < 2 else
                       [c for c, upper in pick_bound(best, [by_label[c] for c in order[1:]], headline,
                                                     estimator=estimator, alpha=alpha).advantages.items() if upper < 0])
    found.shown_worse = [c for c in order if c in set(shown_worse)]
    return found
