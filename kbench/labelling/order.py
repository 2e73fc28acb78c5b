"""Which pair a person labels next: a seeded random share of whole questions, and an active order of the pairs
whose grade could most change which contender is best.

    plan = label_plan(question_of, ranks, model_grades, n_questions, k, seed=0, random_share=0.8)
    plan.order          # [(pair, "random" | "active"), ...]: every pair once, in the order the page serves them
    plan.permutation    # the random share: question indices in a seeded random order (whole pools each)
    plan.active         # the active order: pair indices, most decisive first

The order is a fixed function of the pool, the model's grades and the seed: it never looks at a human grade.

- **Random share**: the questions in a seeded random permutation, each served with its whole pool. The first m
  questions of the permutation whose pools are fully labelled are PPI's labelled set: a simple random sample of
  the questions, whatever m is (the permutation is drawn from the seed alone).
- **Active order**: pairs ranked by how much their grade could move the headline difference between the
  recommended config (``ranks[0]``) and each contender it is not yet decided against (``ranks[1:]``): the
  difference of the two configs' rank discounts for the pair (|1/log2(1 + rank_a) - 1/log2(1 + rank_b)|, 0 outside
  the top k; a pair both rank alike cannot move their difference), the largest over the contenders, over the
  question's ideal DCG under the model's grades (a pair counts for more in a question with few relevant ones),
  times the model's uncertainty about the pair (``UNCERTAINTY``). Ties go by a seeded shuffle. Pairs with
  priority 0 are left to the random share.
- **Schedule**: the first ``MIN_QUESTIONS`` random-share questions come first, alone: no interval is given
  before them, so an active label served earlier could only delay the first decision (benchmarks/active_labels.py
  measured exactly that). Then steps alternate one random-share question with ``block`` active positions (``block`` = the mean
  pool size x (1 - share) / share, so about ``random_share`` of the labels go to the random share). A pair
  already labelled when a stream reaches it is passed (a person never labels a pair twice).

What the estimate uses (``labelling.estimate``): the random share's longest fully labelled prefix of the
permutation (the labelled questions) and the active order's longest fully labelled prefix (pairs whose human grade
replaces the model's in the predictor, for every question). Both are prefixes of orders fixed before any label,
so for given lengths the two sets do not depend on the labels: the predictor is fixed before the random sample
is read, which is what keeps PPI's rectifier unbiased (docs/how-to/labelling.md, "Why the interval stays valid").
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kbench.evaluation.pooled import pool_layout

RANDOM, ACTIVE = "random", "active"
MIN_QUESTIONS = 10  # random-share questions before any interval: below it the normal approximation is not to be trusted
# How unsure the model is of a grade, 0-1: a pair it did not grade is a coin toss; a middle grade (1 or 2: "related"
# or "relevant") sits at the relevance boundary; 0 and 3 are the grades a judge is most often right about. Only the
# order depends on these numbers; the interval's validity does not.
UNCERTAINTY = {None: 1.0, 0: 0.35, 1: 0.8, 2: 0.8, 3: 0.35}


def uncertainty(grades: np.ndarray) -> np.ndarray:
    """The model's uncertainty per pair (``UNCERTAINTY``; NaN = not graded; binary grades 0/1 as 0 and 3)."""
    out = np.full(len(grades), UNCERTAINTY[None])
    for grade, value in UNCERTAINTY.items():
        if grade is not None:
            out[np.asarray(grades) == grade] = value
    return out


def active_priority(question_of, ranks, model_grades, n_questions: int, k: int) -> np.ndarray:
    """How much each pair's grade could move the difference between ``ranks[0]`` (the recommended config) and any
    of ``ranks[1:]`` (the contenders it is not decided against): see the module's docstring."""
    ranks = np.atleast_2d(np.asarray(ranks))
    if ranks.shape[0] < 2:
        return np.zeros(ranks.shape[1])
    discount = np.where((ranks >= 1) & (ranks <= k), 1.0 / np.log2(np.maximum(ranks, 1) + 1.0), 0.0)
    swing = np.abs(discount[1:] - discount[0]).max(axis=0)
    model = np.nan_to_num(np.asarray(model_grades, dtype=float), nan=0.0)
    layout = pool_layout(question_of, n_questions)
    padded = np.where(layout >= 0, model[np.maximum(layout, 0)], 0.0)
    best = -np.sort(-padded, axis=1)[:, :k]
    ideal = best @ (1.0 / np.log2(np.arange(best.shape[1]) + 2.0))
    scale = np.maximum(ideal, 1.0)[np.asarray(question_of, dtype=int)]  # at least one relevant pair's worth
    return swing / scale * uncertainty(np.asarray(model_grades, dtype=float))


@dataclass(frozen=True)
class LabelPlan:
    permutation: list[int]  # question indices, the random share's order
    active: list[int]  # pair indices, the active order (priority > 0, most decisive first)
    order: list[tuple[int, str]]  # every pair once: (pair index, the stream that reached it first)
    block: int  # active positions per random-share question
    random_share: float
    seed: int

    def as_dict(self) -> dict:
        return {"permutation": self.permutation, "active": self.active, "order": [list(x) for x in self.order],
                "block": self.block, "random_share": self.random_share, "seed": self.seed}

    @classmethod
    def from_dict(cls, data: dict) -> "LabelPlan":
        return cls([int(x) for x in data["permutation"]], [int(x) for x in data["active"]],
                   [(int(p), str(s)) for p, s in data["order"]], int(data["block"]), float(data["random_share"]),
                   int(data["seed"]))


def label_plan(question_of, ranks, model_grades, n_questions: int, k: int, *, seed: int = 0,
               random_share: float = 0.8) -> LabelPlan:
    """The order a person labels the pool in (see the module's docstring). ``random_share`` in (0, 1]: 1 is the
    random share alone (question after question)."""
    if not 0 < random_share <= 1 or math.isnan(random_share):
        raise ValueError(f"random_share {random_share}: a share above 0 and at most 1 (PPI needs a random share "
                         "of whole questions)")
    question_of = np.asarray(question_of, dtype=int)
    rng = np.random.default_rng(seed)
    permutation = [int(q) for q in rng.permutation(n_questions)]
    priority = active_priority(question_of, ranks, model_grades, n_questions, k)
    tiebreak = rng.permutation(len(question_of))
    active = [int(p) for p in np.lexsort((tiebreak, -priority)) if priority[p] > 0] if random_share < 1 else []
    sizes = np.bincount(question_of, minlength=n_questions)
    mean_pool = float(sizes[sizes > 0].mean()) if (sizes > 0).any() else 1.0
    block = max(1, round(mean_pool * (1 - random_share) / random_share)) if active else 0
    by_question = [[] for _ in range(n_questions)]
    for p in range(len(question_of)):
        by_question[question_of[p]].append(p)
    order, seen, cursor = [], set(), 0
    for step, q in enumerate(permutation):
        for p in by_question[q]:
            if p not in seen:
                seen.add(p)
                order.append((p, RANDOM))
        if step + 1 < MIN_QUESTIONS:
            continue
        for p in active[cursor:cursor + block]:
            if p not in seen:
                seen.add(p)
                order.append((p, ACTIVE))
        cursor += block
    return LabelPlan(permutation, active, order, block, float(random_share), int(seed))


def labelled_prefixes(plan: LabelPlan, question_of, graded, set_aside=()) -> tuple[np.ndarray, np.ndarray]:
    """(questions mask, pairs mask): the random share's longest fully graded prefix of the permutation, and the
    active order's longest fully graded prefix. ``graded``: a boolean per pair (a human grade exists).
    ``set_aside``: pairs a person skipped twice (kbench.labelling.labels): the prefixes pass over them and over
    their questions (which leave the random share) instead of stopping there."""
    question_of = np.asarray(question_of, dtype=int)
    graded = np.asarray(graded, dtype=bool)
    n_questions = len(plan.permutation)
    complete = np.bincount(question_of, weights=~graded, minlength=n_questions) == 0
    left = {int(question_of[p]) for p in set_aside if not graded[p]}
    questions = np.zeros(n_questions, dtype=bool)
    for q in plan.permutation:
        if q in left:
            continue
        if not complete[q]:
            break
        questions[q] = True
    pairs = np.zeros(len(question_of), dtype=bool)
    for p in plan.active:
        if not graded[p] and p in set_aside:
            continue
        if not graded[p]:
            break
        pairs[p] = True
    return questions, pairs


def questions_left_out(question_of, graded, set_aside) -> list[int]:
    """The questions that left the random share: those of a pair skipped twice and still ungraded."""
    graded = np.asarray(graded, dtype=bool)
    return sorted({int(np.asarray(question_of)[p]) for p in set_aside if not graded[p]})


def pairs_before(plan: LabelPlan, question_of, graded, questions: int, set_aside=()) -> tuple[int, int]:
    """(questions, pairs) still to label before the random share's labelled prefix holds ``questions`` questions:
    the ungraded pairs of the first ``questions`` questions of the permutation that are still in it."""
    question_of = np.asarray(question_of, dtype=int)
    graded = np.asarray(graded, dtype=bool)
    left = set(questions_left_out(question_of, graded, set_aside))
    todo = np.bincount(question_of, weights=~graded, minlength=len(plan.permutation))
    taken = [q for q in plan.permutation if q not in left][:questions]
    open_ = [q for q in taken if todo[q] > 0]
    return len(open_), int(sum(todo[q] for q in open_))


__all__ = ["ACTIVE", "LabelPlan", "RANDOM", "UNCERTAINTY", "active_priority", "label_plan", "labelled_prefixes",
           "pairs_before", "questions_left_out", "uncertainty"]
