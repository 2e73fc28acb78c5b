"""The run summary's diagnosis lines (kbench run prints them): shares, ceilings, budgets, nothing when absent."""
from __future__ import annotations

from kbench.cli.tables import diagnosis_lines


def test_lines_show_what_the_run_computed_and_nothing_else():
    metrics = {"miss_share_hit": 0.9, "miss_share_lost_in_fusion": 0.1, "miss_share_lost_in_rerank": 0.0,
               "doc_ndcg_at_10": 0.5, "ceiling_doc_rerank_ndcg_at_10": 0.8, "ceiling_doc_pool_ndcg_at_10": 0.9,
               "ceiling_doc_pool_recall": 0.95, "ceiling_doc_rerank_ndcg_at_5": 0.7,
               "doc_recall_at_budget_1000": 0.6, "doc_recall_at_budget_500": 0.4}
    lines = diagnosis_lines(metrics)
    assert lines[0] == ""
    assert lines[1] == "where relevant items ended: hit 0.9000, lost_in_fusion 0.1000"
    assert lines[2] == ("doc nDCG@10: run 0.5000, perfect rerank 0.8000, perfect fusion 0.9000 "
                        "(pool recall 0.9500)")
    assert lines[3] == "doc_recall at a token budget: 500 0.4000, 1000 0.6000"  # one format: 4 decimals
    # the tokenizer that counted them: one for every model, or the one the config names (issue 53 item 4)
    assert lines[4] == "  budget tokens counted by all-MiniLM-L6-v2's tokenizer, the same for every model"
    assert diagnosis_lines(metrics, "all-mpnet-base-v2")[4] == ("  budget tokens counted by all-mpnet-base-v2's "
                                                                "tokenizer (evaluation.budget_tokenizer)")
    assert diagnosis_lines({"doc_ndcg_at_10": 0.5}) == []
