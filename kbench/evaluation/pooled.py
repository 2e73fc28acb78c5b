"""nDCG@k of several configs on one pool of graded pairs, for many grade vectors at once.

    ndcg = pooled_ndcg(grades, question_of, ranks, n_questions, k)   # grades: [P] or [R, P] -> [C, Q] or [R, C, Q]

A *pool* is the union of the configs' top k per question; each pair (question, unit) has a grade (0 = not
relevant; NaN = not graded, counted as 0, the pooled convention). ``ranks[c, p]`` is the pair's 1-based rank in
config c's top k of its question, 0 when c did not rank it there. A config's DCG is the sum of grade / log2(rank +
1) over its top k (linear gain, as ``metrics.ndcg_at_k``); the ideal DCG is that of the question's best k grades
*in the pool*, shared by every config, so a difference of two configs is a difference of their DCGs over one
scale. This is the metric the labelling loop estimates (``kbench.labelling``): it needs only the pool's grades,
which is all a person labels.

Vectorised over repetitions (``grades`` of shape [R, P]) so a simulation of hundreds of labellings runs in
milliseconds.
"""
from __future__ import annotations

import numpy as np


def _discount(ranks: np.ndarray, k: int) -> np.ndarray:
    ranks = np.asarray(ranks)
    out = np.zeros(ranks.shape, dtype=float)
    inside = (ranks >= 1) & (ranks <= k)
    out[inside] = 1.0 / np.log2(ranks[inside] + 1.0)
    return out


def pool_layout(question_of: np.ndarray, n_questions: int) -> np.ndarray:
    """[Q, M] pair indices of each question's pool, padded with -1 (M: the largest pool)."""
    question_of = np.asarray(question_of, dtype=int)
    order = np.argsort(question_of, kind="stable")
    sizes = np.bincount(question_of, minlength=n_questions)
    layout = np.full((n_questions, max(int(sizes.max(initial=0)), 1)), -1, dtype=int)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    position = np.arange(len(order)) - starts[question_of[order]]
    layout[question_of[order], position] = order
    return layout


def pooled_ndcg(grades, question_of, ranks, n_questions: int, k: int) -> np.ndarray:
    """nDCG@k per config and question from the pool's grades (see the module's docstring). 0 for a question whose
    pool holds no relevant grade."""
    grades = np.asarray(grades, dtype=float)
    single = grades.ndim == 1
    gains = np.nan_to_num(np.atleast_2d(grades), nan=0.0)  # [R, P]
    ranks = np.atleast_2d(np.asarray(ranks))  # [C, P]
    question_of = np.asarray(question_of, dtype=int)
    if gains.shape[1] != len(question_of) or ranks.shape[1] != len(question_of):
        raise ValueError(f"pooled_ndcg: {len(question_of)} pairs, but grades hold {gains.shape[1]} and ranks "
                         f"{ranks.shape[1]}")
    discount = _discount(ranks, k)  # [C, P]
    dcg = np.zeros((gains.shape[0], ranks.shape[0], n_questions))
    for c in range(ranks.shape[0]):  # a handful of configs; each a scatter-add over pairs
        np.add.at(dcg[:, c, :], (slice(None), question_of), gains * discount[c])
    layout = pool_layout(question_of, n_questions)
    padded = np.where(layout >= 0, gains[:, np.maximum(layout, 0)], 0.0)  # [R, Q, M]
    best = -np.sort(-padded, axis=2)[:, :, :k]
    ideal = best @ (1.0 / np.log2(np.arange(best.shape[2]) + 2.0))  # [R, Q]
    with np.errstate(invalid="ignore", divide="ignore"):
        ndcg = np.where(ideal[:, None, :] > 0, dcg / ideal[:, None, :], 0.0)
    return ndcg[0] if single else ndcg


__all__ = ["pool_layout", "pooled_ndcg"]
