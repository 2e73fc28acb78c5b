"""Human labels and a model's labels into intervals that carry the model's error, and the recommendation on them.

    found = estimate_labels(arrays, plan, human_grades)   # arrays: the pool as arrays (PoolArrays)
    print("\\n".join(found.lines()))

- **Y** (the truth the interval is about): the metric (``pooled_ndcg_at_<k>``, see kbench/evaluation/pooled.py)
  under human grades, on the random share's labelled questions (``order.labelled_prefixes``).
- **Yhat** (the predictor): the same metric under the model's grades (the LLM judge's, or the generated set's
  labels), where the human grade replaces the model's on every pair of the active order's labelled prefix, for
  every question. Fixed before the random sample is read (see kbench/labelling/order.py).
- Per config and per difference of the recommended config and each contender: the PPI++ interval
  (kbench/evaluation/ppi.py), the human-only interval (the labelled questions alone) and the model-only interval
  (the model's grades on every question, no human: it carries none of the model's error). When the model's bias
  on a difference is shown (its rectifier, mean(Y - Yhat) with the model's own grades, has an interval excluding
  0), the lines say the model alone is biased there.
- The recommendation: ``evaluation.recommend`` with ``PPIEstimator`` (the non-inferiority rule of the
  recommendation, decided on PPI intervals).
- Agreement: Cohen's kappa and the confusion table of human and model grades on the pairs both graded; a model
  at or below chance agreement is said plainly.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from kbench.evaluation.pooled import pooled_ndcg
from kbench.evaluation.ppi import PPIEstimate, PPIEstimator, classical_mean, human_column, ppi_difference, ppi_mean
from kbench.evaluation.recommend import ConfigRecord, Recommendation, RecommendConfig, recommend
from kbench.judging.agreement import cohen_kappa, confusion
from kbench.labelling.order import LabelPlan, labelled_prefixes

MIN_QUESTIONS = 10  # random-share questions before any interval: below it the normal approximation is not to be trusted
RELEVANT_FROM = 2  # a graded (0-3) grade at or above this is "relevant" beside a binary one (as kbench judge)


@dataclass
class PoolArrays:
    """A pool as arrays: pair p belongs to question ``question_of[p]``; ``ranks[c, p]`` its rank in config c's top
    k (0: not there); ``model_grades[p]`` the model's grade (NaN: none). ``configs[0]`` is the recommended one."""

    question_of: np.ndarray
    ranks: np.ndarray
    model_grades: np.ndarray
    configs: list[str]
    k: int
    n_questions: int

    @property
    def headline(self) -> str:
        return f"pooled_ndcg_at_{self.k}"

    def metric(self, grades) -> np.ndarray:
        return pooled_ndcg(grades, self.question_of, self.ranks, self.n_questions, self.k)


@dataclass
class Intervals:
    ppi: PPIEstimate
    human: PPIEstimate  # the labelled questions alone
    model: PPIEstimate  # the model's grades alone, every question


@dataclass
class Agreement:
    pairs: int
    kappa: float
    table: np.ndarray  # rows: human grades, columns: model grades (``labels``)
    human_labels: list[int]
    model_labels: list[int]

    @property
    def no_better_than_chance(self) -> bool:
        return not self.kappa > 0


@dataclass
class LabelEstimate:
    headline: str
    configs: list[str]
    n_questions: int
    labelled_questions: int
    active_pairs: int  # the active order's labelled prefix
    active_total: int
    human_grades: int
    alpha: float
    per_config: dict[str, Intervals] = field(default_factory=dict)
    differences: dict[str, Intervals] = field(default_factory=dict)  # other -> recommended - other
    bias: dict[str, PPIEstimate] = field(default_factory=dict)  # config or "a - b" -> mean(Y - Yhat_model) of it
    recommendation: Recommendation | None = None
    agreement: Agreement | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def reference(self) -> str:
        return self.configs[0]

    def lines(self) -> list[str]:
        out = [f"labels: {self.human_grades} human grades; random share: {self.labelled_questions} of "
               f"{self.n_questions} questions fully labelled (PPI's labelled set); active order: the first "
               f"{self.active_pairs} of {self.active_total} decisive pairs labelled (they replace the model's grades)"]
        out += [f"  {note}" for note in self.notes]
        if self.per_config:
            out += self._interval_lines()
        out += self._agreement_lines()
        if self.recommendation is not None:
            out += self.recommendation.lines()
        return out

    def _interval_lines(self) -> list[str]:
        pct = f"{1 - self.alpha:.0%}"
        out = []
        out.append(f"{self.headline}, {pct} intervals: PPI++ (humans + model) | humans alone ({self.labelled_questions} "
                   f"questions) | model alone ({self.n_questions} questions, carries none of its error)")
        rows = [(label, found) for label, found in self.per_config.items()]
        rows += [(f"{self.reference} - {other}", found) for other, found in self.differences.items()]
        for name, found in rows:
            out.append(f"  {name}: {_interval(found.ppi, self.alpha)} lambda {found.ppi.lam:.2f} | "
                       f"{_interval(found.human, self.alpha)} | {_interval(found.model, self.alpha)}")
            out += [f"    {line}" for line in self._model_warning(name, found)]
        return out

    def _agreement_lines(self) -> list[str]:
        out = []
        if self.agreement is not None:
            a = self.agreement
            out.append(f"model agreement with the humans: Cohen's kappa {a.kappa:.3f} on {a.pairs} pairs graded by "
                       "both (rows: human grade, columns: model grade)")
            out.append("    " + "  ".join(f"model {g}" for g in a.model_labels))
            for label, row in zip(a.human_labels, a.table):
                out.append(f"  human {label}: " + "  ".join(f"{n:>7d}" for n in row))
            if a.no_better_than_chance:
                out.append(f"  the model agrees with the humans no better than chance (kappa {a.kappa:.3f}): its "
                           "labels carry no information about theirs; PPI++ then weighs them little (lambda says how much) "
                           "and the intervals rest on the human labels")
        return out

    def _model_warning(self, name: str, found: Intervals) -> list[str]:
        """What the model alone gets wrong on ``name``, when the labels show it."""
        bias = self.bias.get(name)
        if bias is not None and not bias.covers(0.0, self.alpha):
            low, high = bias.interval(self.alpha)
            return [f"the model alone is biased here: humans minus model on the labelled questions is "
                    f"{bias.estimate:+.4f} [{low:+.4f}, {high:+.4f}]; its own interval does not carry that error and "
                    "misses: read the PPI++ one"]
        if not found.model.covers(found.ppi.estimate, self.alpha):
            return ["the model alone's interval excludes the PPI++ estimate: it carries none of the model's error "
                    "(read the PPI++ one)"]
        return []

    def as_dict(self) -> dict:
        def interval(e: PPIEstimate) -> dict:
            low, high = e.interval(self.alpha)
            return {"estimate": e.estimate, "low": low, "high": high, "se": e.se, "lambda": e.lam, "n": e.n}

        return {"headline": self.headline, "configs": self.configs, "questions": self.n_questions,
                "labelled_questions": self.labelled_questions, "active_pairs": self.active_pairs,
                "human_grades": self.human_grades, "alpha": self.alpha,
                "per_config": {c: {k: interval(getattr(v, k)) for k in ("ppi", "human", "model")}
                               for c, v in self.per_config.items()},
                "differences": {c: {k: interval(getattr(v, k)) for k in ("ppi", "human", "model")}
                                for c, v in self.differences.items()},
                "kappa": None if self.agreement is None else self.agreement.kappa,
                "recommendation": None if self.recommendation is None else self.recommendation.as_dict(),
                "notes": self.notes}


def _interval(e: PPIEstimate, alpha: float) -> str:
    low, high = e.interval(alpha)
    return f"{e.estimate:.4f} [{low:.4f}, {high:.4f}]"


def agreement(human_grades: np.ndarray, model_grades: np.ndarray, binary_human: bool = False) -> Agreement | None:
    """Kappa and the confusion table on the pairs both graded; a binary human scale is compared with the model's
    grade at or above ``RELEVANT_FROM``."""
    both = ~np.isnan(human_grades) & ~np.isnan(model_grades)
    if both.sum() < 1:
        return None
    human = [int(g) for g in human_grades[both]]
    model = [int(g) for g in model_grades[both]]
    if binary_human and max(model) > 1:
        compared = [int(g >= RELEVANT_FROM) for g in model]
    else:
        compared = model
    human_labels = [0, 1] if binary_human else [0, 1, 2, 3]
    model_labels = sorted(set(model) | ({0, 1} if max(model) <= 1 else {0, 1, 2, 3}))
    return Agreement(len(human), cohen_kappa(human, compared), confusion(human, model, human_labels, model_labels),
                     human_labels, model_labels)


def estimate_labels(arrays: PoolArrays, plan: LabelPlan, human_grades, *, alpha: float = 0.05,
                    recommend_config: RecommendConfig | None = None, binary_human: bool = False,
                    min_questions: int = MIN_QUESTIONS) -> LabelEstimate:
    """Everything the labels say so far (see the module's docstring). ``human_grades``: one per pair, NaN where no
    person graded it; no interval below ``min_questions`` fully labelled random-share questions."""
    human = np.asarray(human_grades, dtype=float)
    model = np.asarray(arrays.model_grades, dtype=float)
    graded = ~np.isnan(human)
    labelled, active = labelled_prefixes(plan, arrays.question_of, graded)
    found = LabelEstimate(arrays.headline, list(arrays.configs), arrays.n_questions, int(labelled.sum()),
                          int(active.sum()), len(plan.active), int(graded.sum()), alpha,
                          agreement=agreement(human, model, binary_human))
    m = int(labelled.sum())
    if m < min_questions:
        found.notes.append(f"no interval yet: {m} random-share questions are fully labelled, {min_questions} are needed "
                           "before a normal interval can be trusted (label on: the page serves them in turn)")
        return found
    if labelled.all():
        found.notes.append("every question is fully labelled: the human-only numbers are the whole set's")
    model_scale = np.where(np.isnan(model), 0.0, model)
    if binary_human and np.nanmax(model, initial=0) > 1:  # compare like with like: the model on the human's scale
        model_scale = (model_scale >= RELEVANT_FROM).astype(float)
    predictor = np.where(active, human, model_scale)
    y = arrays.metric(np.where(graded, human, 0.0))  # read on the labelled questions only
    yhat = arrays.metric(predictor)
    y_model = arrays.metric(model_scale)
    every = labelled.all()
    for c, label in enumerate(arrays.configs):
        human_only = classical_mean(y[c, labelled])
        ppi = human_only if every else ppi_mean(y[c, labelled], yhat[c, labelled], yhat[c, ~labelled])
        found.per_config[label] = Intervals(ppi, human_only, classical_mean(y_model[c]))
        found.bias[label] = classical_mean(y[c, labelled] - y_model[c, labelled])
    for c in range(1, len(arrays.configs)):
        d, dhat, dmodel = y[0] - y[c], yhat[0] - yhat[c], y_model[0] - y_model[c]
        human_only = classical_mean(d[labelled])
        ppi = human_only if every else ppi_difference(y[0, labelled], y[c, labelled], yhat[0, labelled],
                                                      yhat[c, labelled], yhat[0, ~labelled], yhat[c, ~labelled])
        found.differences[arrays.configs[c]] = Intervals(ppi, human_only, classical_mean(dmodel))
        found.bias[f"{arrays.configs[0]} - {arrays.configs[c]}"] = classical_mean(d[labelled] - dmodel[labelled])
    if len(arrays.configs) >= 2 and not every:
        records = [ConfigRecord(label, {arrays.headline: yhat[c],
                                        human_column(arrays.headline): np.where(labelled, y[c], np.nan)})
                   for c, label in enumerate(arrays.configs)]
        config = (recommend_config or RecommendConfig()).model_copy(update={"guards": []})
        found.recommendation = recommend(records, arrays.headline, config, alpha=alpha,
                                         estimator=PPIEstimator(labelled))
    return found


def nan_grades(count: int) -> np.ndarray:
    return np.full(count, math.nan)


__all__ = ["Agreement", "Intervals", "LabelEstimate", "PoolArrays", "agreement", "estimate_labels", "nan_grades"]
