"""The label order as a pure function: the random share's first questions come first and whole, then the two streams
alternate; the order is fixed by the seed and never serves a pair twice."""
from __future__ import annotations

import numpy as np

from kbench.labelling.order import ACTIVE, MIN_QUESTIONS, RANDOM, label_plan


def pool(n_questions: int = 30, per_question: int = 6, seed: int = 1):
    """Two contenders that rank each question's pairs in opposite orders (every pair can move their difference)."""
    rng = np.random.default_rng(seed)
    question_of = np.repeat(np.arange(n_questions), per_question)
    within = np.tile(np.arange(1, per_question + 1), n_questions)
    ranks = np.vstack([within, per_question + 1 - within])
    grades = rng.integers(0, 4, size=len(question_of)).astype(float)
    return question_of, ranks, grades, n_questions


def test_the_first_questions_are_served_whole_before_any_active_pair():
    question_of, ranks, grades, n = pool()
    plan = label_plan(question_of, ranks, grades, n, k=10, seed=3, random_share=0.5)
    head = [(p, stream) for p, stream in plan.order][: MIN_QUESTIONS * 6]
    assert {stream for _, stream in head} == {RANDOM}
    assert [question_of[p] for p, _ in head][::6] == plan.permutation[:MIN_QUESTIONS]
    streams = [stream for _, stream in plan.order]
    assert ACTIVE in streams[MIN_QUESTIONS * 6:]  # then the active order joins in
    assert sorted(p for p, _ in plan.order) == list(range(len(question_of)))  # every pair once
    assert label_plan(question_of, ranks, grades, n, k=10, seed=3, random_share=0.5) == plan  # fixed by the seed


def test_a_random_share_of_one_is_the_random_order_alone():
    question_of, ranks, grades, n = pool()
    plan = label_plan(question_of, ranks, grades, n, k=10, seed=3, random_share=1.0)
    assert {stream for _, stream in plan.order} == {RANDOM} and plan.active == []
