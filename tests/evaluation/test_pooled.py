"""pooled_ndcg: per config and question, equal to metrics.ndcg_at_k with the pool's grades as the qrels; on SciFact's
real pool, and batched over repetitions."""
from __future__ import annotations

import numpy as np
import pytest

from kbench.evaluation.metrics import ndcg_at_k
from kbench.evaluation.pooled import pooled_ndcg
from tests.labelling.scifact_pool import scifact_pool


def test_pooled_ndcg_is_ndcg_at_k_over_the_pools_grades():
    pool = scifact_pool()
    n_questions = len(pool.question_ids)
    rng = np.random.default_rng(1)
    grades = np.where(rng.random(len(pool.human)) < 0.1, rng.integers(0, 4, len(pool.human)), pool.human * 2)
    found = pooled_ndcg(grades, pool.question_of, pool.ranks, n_questions, 10)
    for q in range(0, n_questions, 7):
        pairs = np.flatnonzero(pool.question_of == q)
        relevant = [int(g) for g in grades[pairs] if g > 0]
        for c in range(2):
            ranked = sorted((r, int(grades[p])) for p, r in zip(pairs, pool.ranks[c, pairs]) if r > 0)
            assert found[c, q] == pytest.approx(ndcg_at_k([g for _, g in ranked], relevant, 10), abs=1e-12)
    batch = pooled_ndcg(np.stack([grades, pool.human]), pool.question_of, pool.ranks, n_questions, 10)
    assert np.allclose(batch[0], found, rtol=0, atol=1e-12)
    assert np.allclose(batch[1], pooled_ndcg(pool.human, pool.question_of, pool.ranks, n_questions, 10))


def test_ungraded_pairs_count_as_not_relevant():
    question_of, ranks = np.array([0, 0, 1]), np.array([[1, 2, 1], [2, 0, 0]])
    found = pooled_ndcg([np.nan, 1.0, 0.0], question_of, ranks, 2, 10)
    assert found[0, 0] == pytest.approx((1 / np.log2(3)) / 1.0) and found[1, 0] == 0.0 and found[:, 1].tolist() == [0, 0]
