"""Budgets, miss stages, ceilings and slices through the real pipeline: the demo set, BM25 (no embedding)."""
from __future__ import annotations

import numpy as np
import pytest

from kbench.config import load_experiment
from kbench.evaluation.miss_stages import MISS_STAGES
from kbench.evaluation.slices import slice_table
from kbench.pipeline import run_pipeline


@pytest.fixture(scope="module")
def demo_bm25(tmp_path_factory):
    experiment = load_experiment("configs/quickstart.yaml", [
        f"workspace={tmp_path_factory.mktemp('ws')}", "retrieval.legs=[bm25]", "retrieval.top_k=20",
        "evaluation.k=[1,5,10]", "evaluation.budgets=[100,400,1600]",
        "evaluation.slices=[doc_type,corpus,query_length]", "tracking.enabled=false"])
    return run_pipeline(experiment, progress=False)


def test_hits_agree_with_the_span_ranks_and_shares_add_up(demo_bm25):
    pq = demo_bm25.per_query
    for stages, ranks in zip(pq["miss_stage"], pq["spans_hit"]):
        assert len(stages) == len(ranks)  # one stage per reference span
        assert [s == "hit" for s in stages] == [0 < r <= 10 for r in ranks]
        assert set(stages) <= set(MISS_STAGES)
    shares = {s: demo_bm25.metrics[f"miss_share_{s}"] for s in MISS_STAGES}
    assert abs(sum(shares.values()) - 1) < 1e-9
    assert shares["lost_in_rerank"] == shares["lost_in_grouping"] == 0  # neither stage ran
    assert shares["lost_in_fusion"] == 0  # one leg: the fused list is the leg's list


def test_ceilings_bound_the_run_and_budgets_grow(demo_bm25):
    pq, m = demo_bm25.per_query, demo_bm25.metrics
    assert (pq["ceiling_doc_pool_recall"] >= pq["doc_recall_at_10"] - 1e-12).all()
    assert (pq["ceiling_chunk_rerank_ndcg_at_10"] >= pq["chunk_ndcg_at_10"] - 1e-12).all()
    assert (pq["ceiling_chunk_pool_ndcg_at_10"] >= pq["ceiling_chunk_rerank_ndcg_at_10"] - 1e-12).all()
    recalls = [m[f"span_recall_at_budget_{n}"] for n in (100, 400, 1600)]
    assert recalls == sorted(recalls) and recalls[-1] > 0
    assert 0 < m["span_precision_at_budget_400"] <= 1


def test_slices_label_every_query_and_their_table_weights_back_to_the_mean(demo_bm25):
    pq = demo_bm25.per_query
    assert set(pq["slice_query_length"]) <= {"short", "medium", "long"}
    assert pq["slice_doc_type"].notna().all() and pq["slice_corpus"].notna().all()
    table = slice_table(pq, "query_length", ["chunk_ndcg_at_10"])
    parts = table.drop(index="(all)")
    assert parts["n_queries"].sum() == len(pq) == table.loc["(all)", "n_queries"]
    weighted = (parts["chunk_ndcg_at_10"] * parts["n_queries"]).sum() / len(pq)
    assert np.isclose(weighted, table.loc["(all)", "chunk_ndcg_at_10"])
