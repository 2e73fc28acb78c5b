"""The perfect-rerank ceiling equals the best of every possible reorder of the candidates."""
from __future__ import annotations

import math
from itertools import permutations

from hypothesis import given, settings
from hypothesis import strategies as st

from kbench.evaluation.ceilings import best_reorder_ndcg, ceiling_row
from kbench.evaluation.metrics import ndcg_at_k


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=6), st.lists(st.integers(1, 3), max_size=5),
       st.integers(1, 7))
def test_best_reorder_is_the_maximum_over_all_orders(candidates, unseen, k):
    relevant = [g for g in candidates if g > 0] + unseen  # judged items the pool holds, and some it lacks
    best = max(ndcg_at_k(list(p), relevant, k) for p in permutations(candidates))
    assert math.isclose(best_reorder_ndcg(candidates, relevant, k), best, abs_tol=1e-12)


def test_ceiling_row_counts_documents_once_and_reads_pool_and_candidates_apart():
    grades = {"a": 2, "b": 1, "c": 1}
    row = ceiling_row("doc", pool=["x", "a", "a", "b"], candidates=["x", "b", "b"], grades=grades, ks=[2])
    assert row["ceiling_doc_pool_recall"] == 2 / 3
    ideal = 2 + 1 / math.log2(3)
    assert math.isclose(row["ceiling_doc_pool_ndcg_at_2"], ideal / ideal)  # a then b: the best order
    assert math.isclose(row["ceiling_doc_rerank_ndcg_at_2"], 1 / ideal)  # only b among the candidates
