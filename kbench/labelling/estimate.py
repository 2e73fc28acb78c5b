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
- One scale (``one_scale``): human and model grades are put on one scale before kappa, the confusion table and
  PPI++. A binary model (a generated set's 0/1 labels) against graded humans (0-3): the human grade is binarized
  at kbench's relevance threshold (``RELEVANT_FROM``: 2 and 3 relevant, as ``kbench judge`` reads a grade); a
  graded model against binary humans: the model's grade, likewise; both graded: both 0-3 as given. The estimand is
  then the metric on that scale (binary relevance when either side is binary), and the lines say which.
- Skips: a pair a person skipped twice is set aside (kbench/labelling/labels.py): the prefixes pass over it, its
  question leaves the random share, and the lines say which questions left it.
- Agreement: Cohen's kappa and the confusion table on that scale, on the pairs both graded; a model at or below
  chance agreement is said plainly. With several models' grades (the served LLM judge's and a trained judge's,
  ``PoolArrays.others``), each one's kappa is shown and PPI++ uses the one that agrees best (on at least
  ``MIN_AGREEMENT_PAIRS`` pairs graded by both; the choice reads the labels, as PPI++'s lambda does).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from kbench.evaluation.pooled import pooled_ndcg
from kbench.evaluation.ppi import PPIEstimate, PPIEstimator, classical_mean, human_column, ppi_difference, ppi_mean
from kbench.evaluation.recommend import ConfigRecord, Recommendation, RecommendConfig, recommend
from kbench.judging.agreement import cohen_kappa, confusion
from kbench.labelling.order import MIN_QUESTIONS, LabelPlan, labelled_prefixes, pairs_before, questions_left_out

RELEVANT_FROM = 2  # a graded (0-3) grade at or above this is "relevant" beside a binary one (as kbench judge)
MIN_AGREEMENT_PAIRS = 20  # pairs graded by a person and a model before the models' kappas choose one for PPI++
BINARY, GRADED = "binary", "graded"


def scale_of(grades) -> str:
    """A model's scale read from its grades when the pool does not say: 0/1 only is binary."""
    grades = np.asarray(grades, dtype=float)
    return BINARY if np.nanmax(grades, initial=0) <= 1 else GRADED


@dataclass(frozen=True)
class Scale:
    """How human and model grades are compared: both as given, or one binarized at ``RELEVANT_FROM``."""

    name: str  # binary | graded
    binarize_human: bool
    binarize_model: bool

    def human(self, grades) -> np.ndarray:
        grades = np.asarray(grades, dtype=float)
        return np.where(np.isnan(grades), np.nan, (grades >= RELEVANT_FROM).astype(float)) if self.binarize_human \
            else grades

    def model(self, grades) -> np.ndarray:
        grades = np.asarray(grades, dtype=float)
        return np.where(np.isnan(grades), np.nan, (grades >= RELEVANT_FROM).astype(float)) if self.binarize_model \
            else grades

    @property
    def says(self) -> str:
        if self.binarize_human:
            return f"binary: human grade >= {RELEVANT_FROM} relevant, the model's 0/1 as given"
        if self.binarize_model:
            return f"binary: model grade >= {RELEVANT_FROM} relevant, the human's 0/1 as given"
        return "graded 0-3, both as given" if self.name == GRADED else "binary, both as given"


def one_scale(human_scale: str, model_scale: str) -> Scale:
    """The scale a person's and a model's grades are compared on (see the module's docstring)."""
    if human_scale == GRADED and model_scale == BINARY:
        return Scale(BINARY, True, False)
    if human_scale == BINARY and model_scale == GRADED:
        return Scale(BINARY, False, True)
    return Scale(human_scale, False, False)


@dataclass
class ModelGrades:
    """One model's grades of a pool's pairs (NaN: none) and its scale."""

    name: str
    grades: np.ndarray
    scale: str = ""  # binary | graded; "" read from the grades

    @property
    def resolved_scale(self) -> str:
        return self.scale or scale_of(self.grades)


@dataclass
class PoolArrays:
    """A pool as arrays: pair p belongs to question ``question_of[p]``; ``ranks[c, p]`` its rank in config c's top
    k (0: not there); ``model_grades[p]`` the model's grade (NaN: none), on ``model_scale`` (binary | graded; ""
    read from the grades); ``others``: other models' grades of the same pairs (a trained judge beside the served
    one). ``configs[0]`` is the recommended one."""

    question_of: np.ndarray
    ranks: np.ndarray
    model_grades: np.ndarray
    configs: list[str]
    k: int
    n_questions: int
    model_scale: str = ""
    model_name: str = "the model"
    others: list[ModelGrades] = field(default_factory=list)
    values: dict[str, dict[str, float]] = field(default_factory=dict)  # config -> its run's logged costs, p95s

    @property
    def headline(self) -> str:
        return f"pooled_ndcg_at_{self.k}"

    @property
    def models(self) -> list[ModelGrades]:
        return [ModelGrades(self.model_name, np.asarray(self.model_grades, dtype=float), self.model_scale),
                *self.others]

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
    table: np.ndarray  # rows: human grades, columns: model grades (``labels``), on ``scale``
    human_labels: list[int]
    model_labels: list[int]
    scale: Scale | None = None
    model: str = "the model"

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
    agreement: Agreement | None = None  # the model PPI++ uses
    agreements: list[Agreement] = field(default_factory=list)  # every model's, the one PPI++ uses first
    notes: list[str] = field(default_factory=list)
    min_questions: int = MIN_QUESTIONS
    left_out: list[str] = field(default_factory=list)  # questions that left the random share (a pair skipped twice)

    @property
    def questions_to_decide(self) -> int | None:
        """Labelled questions that would decide the recommendation (about; 0: decided; None: no number decides, or
        no interval yet)."""
        return None if self.recommendation is None else self.recommendation.questions_to_decide

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
            scale = f", on one scale ({a.scale.says})" if a.scale is not None else ""
            out.append(f"model agreement with the humans{scale}: Cohen's kappa {a.kappa:.3f} on {a.pairs} pairs "
                       f"graded by both ({a.model}; rows: human grade, columns: model grade)")
            out.append("    " + "  ".join(f"model {g}" for g in a.model_labels))
            for label, row in zip(a.human_labels, a.table):
                out.append(f"  human {label}: " + "  ".join(f"{n:>7d}" for n in row))
            for other in self.agreements[1:]:
                on = f" (on one scale: {other.scale.says})" if other.scale is not None else ""
                out.append(f"  beside it, {other.model}: Cohen's kappa {other.kappa:.3f} on {other.pairs} pairs{on}")
            if len(self.agreements) > 1:
                out.append(f"  PPI++ uses {a.model}'s grades: of the {len(self.agreements)} models it agrees best "
                           "with the humans" if a.pairs >= MIN_AGREEMENT_PAIRS else
                           f"  PPI++ uses {a.model}'s grades (fewer than {MIN_AGREEMENT_PAIRS} pairs graded by both: "
                           "too few to choose a model by its kappa)")
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
                "scale": None if self.agreement is None or self.agreement.scale is None else self.agreement.scale.says,
                "model": None if self.agreement is None else self.agreement.model,
                "kappas": {a.model: a.kappa for a in self.agreements},
                "recommendation": None if self.recommendation is None else self.recommendation.as_dict(),
                "notes": self.notes}


def _interval(e: PPIEstimate, alpha: float) -> str:
    low, high = e.interval(alpha)
    return f"{e.estimate:.4f} [{low:.4f}, {high:.4f}]"


def agreement(human_grades: np.ndarray, model_grades: np.ndarray, binary_human: bool = False,
              model_scale: str = "", model: str = "the model") -> Agreement | None:
    """Kappa and the confusion table on the pairs both graded, on one scale (``one_scale``): a binary model against
    graded humans binarizes the human grade at ``RELEVANT_FROM``, a graded model against binary humans the model's."""
    human_grades, model_grades = np.asarray(human_grades, dtype=float), np.asarray(model_grades, dtype=float)
    both = ~np.isnan(human_grades) & ~np.isnan(model_grades)
    if both.sum() < 1:
        return None
    scale = one_scale(BINARY if binary_human else GRADED, model_scale or scale_of(model_grades))
    human = [int(g) for g in scale.human(human_grades[both])]
    compared = [int(g) for g in scale.model(model_grades[both])]
    labels = [0, 1] if scale.name == BINARY else [0, 1, 2, 3]
    model_labels = sorted(set(compared) | set(labels))
    return Agreement(len(human), cohen_kappa(human, compared), confusion(human, compared, labels, model_labels),
                     labels, model_labels, scale, model)


def best_model(agreements: list[Agreement | None]) -> int:
    """The model PPI++ uses: the first (the pool's own) unless another agrees better with the humans, each on
    ``MIN_AGREEMENT_PAIRS`` pairs or more (a NaN kappa never wins)."""
    def score(a: Agreement | None) -> float:
        return -math.inf if a is None or a.pairs < MIN_AGREEMENT_PAIRS or math.isnan(a.kappa) else a.kappa

    scores = [score(a) for a in agreements]
    best = max(range(len(scores)), key=lambda i: (scores[i], -i))
    return best if scores[best] > scores[0] else 0


def estimate_labels(arrays: PoolArrays, plan: LabelPlan, human_grades, *, alpha: float = 0.05,
                    recommend_config: RecommendConfig | None = None, binary_human: bool = False,
                    min_questions: int = MIN_QUESTIONS, set_aside=(), question_ids: list[str] | None = None
                    ) -> LabelEstimate:
    """Everything the labels say so far (see the module's docstring). ``human_grades``: one per pair, NaN where no
    person graded it; no interval below ``min_questions`` fully labelled random-share questions. ``set_aside``:
    pairs a person skipped twice, whose questions leave the random share (named by ``question_ids``)."""
    human = np.asarray(human_grades, dtype=float)
    graded = ~np.isnan(human)
    labelled, active = labelled_prefixes(plan, arrays.question_of, graded, set_aside)
    models = arrays.models
    agreements = [agreement(human, m.grades, binary_human, m.resolved_scale, m.name) for m in models]
    chosen = best_model(agreements)
    model_of = models[chosen]
    order = [chosen] + [i for i in range(len(models)) if i != chosen]
    found = LabelEstimate(arrays.headline, list(arrays.configs), arrays.n_questions, int(labelled.sum()),
                          int(active.sum()), len(plan.active), int(graded.sum()), alpha,
                          agreement=agreements[chosen], agreements=[agreements[i] for i in order
                                                                    if agreements[i] is not None],
                          min_questions=min_questions)
    left = questions_left_out(arrays.question_of, graded, set_aside)
    if left:
        names = [question_ids[q] if question_ids else str(q) for q in left]
        found.left_out = names
        found.notes.append(f"{len(left)} question{'s' if len(left) > 1 else ''} left the random share (a pair of "
                           f"each skipped twice: {', '.join(names[:5])}{', ...' if len(names) > 5 else ''}): the "
                           "labelled questions are a random sample of those a person could grade; the intervals "
                           "hold for the set if the model errs alike on the others")
    m = int(labelled.sum())
    if m < min_questions:
        _, pairs = pairs_before(plan, arrays.question_of, graded, min_questions, set_aside)
        found.notes.append(f"no interval yet: {m} random-share questions are fully labelled, {min_questions} are needed "
                           f"before a normal interval can be trusted (label on: {pairs} more pairs, which the page "
                           "serves next)")
        return found
    if labelled.all():
        found.notes.append("every question is fully labelled: the human-only numbers are the whole set's")
    scale = one_scale(BINARY if binary_human else GRADED, model_of.resolved_scale)
    if scale.binarize_human or scale.binarize_model:
        found.notes.append(f"on one scale ({scale.says}): {arrays.headline} with binary relevance")
    human = scale.human(human)  # like with like: both on one scale before PPI++
    model_scale = np.nan_to_num(scale.model(model_of.grades), nan=0.0)
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
                                        human_column(arrays.headline): np.where(labelled, y[c], np.nan)},
                                arrays.values.get(label, {}))
                   for c, label in enumerate(arrays.configs)]
        config = (recommend_config or RecommendConfig()).model_copy(update={"guards": []})
        found.recommendation = recommend(records, arrays.headline, config, alpha=alpha,
                                         estimator=PPIEstimator(labelled))
    return found


def nan_grades(count: int) -> np.ndarray:
    return np.full(count, math.nan)


__all__ = ["Agreement", "BINARY", "GRADED", "Intervals", "LabelEstimate", "ModelGrades", "PoolArrays", "Scale",
           "agreement", "best_model", "estimate_labels", "nan_grades", "one_scale", "scale_of"]
