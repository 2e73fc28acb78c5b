"""Document-level metrics equal pytrec_eval's (trec_eval's definitions) to 1e-9 on a real SciFact run.

The run is the SciFact sample tests/compare/test_gate.py and tests/store/test_pgvector_store.py embed too (300
abstracts, 40 test claims, MiniLM, one chunk per abstract), so its vectors come from the run's shared cache
whichever of them runs first: a sample of its own (400 abstracts, 120 claims) cost 44 s of embedding in a
clean-clone run. The property does not depend on the sample's size: every metric is compared per claim at every
cutoff (40 claims x 4 cutoffs x 6 metrics), and 100 retrieved abstracts of 300 still fill the deepest cutoff."""
from __future__ import annotations

import pytest
import pytrec_eval

from kbench.config import load_experiment
from kbench.evaluation.metrics import (average_precision_at_k, hit_rate_at_k, mrr_at_k, ndcg_at_k,
                                       precision_at_k, recall_at_k)
from kbench.runner import run_experiment

KS = [1, 5, 10, 100]


@pytest.fixture(scope="module")
def scifact_run(shared_cache_workspace):
    config = {
        "name": "parity", "workspace": str(shared_cache_workspace),
        "dataset": {"name": "scifact", "max_documents": 300, "max_queries": 40},  # test_gate.py's SAMPLE
        "chunking": {"strategy": "none"},
        "retrieval": {"legs": ["vector"], "top_k": 100},
        "evaluation": {"k": KS},
    }
    return run_experiment(load_experiment(config), progress=False, log=False)


@pytest.mark.slow
def test_doc_metrics_equal_pytrec_eval(scifact_run):
    result = scifact_run
    qrels = {q: result.dataset.qrels[q] for q in result.run.query_ids}
    # trec_eval ranks by score; give it each document's best-chunk score, the same order kbench used
    runs = {}
    for qid, hits in result.run.hits.items():
        scores = {}
        for h in hits:
            scores.setdefault(h.doc_id, float(h.score))
        runs[qid] = scores
        assert list(scores) == result.run.doc_ids(qid)
    assert all(len(set(s.values())) == len(s) for s in runs.values()), "ties would make the order ambiguous"

    measures = {f"P.{','.join(map(str, KS))}", f"recall.{','.join(map(str, KS))}",
                f"ndcg_cut.{','.join(map(str, KS))}", f"map_cut.{','.join(map(str, KS))}",
                f"success.{','.join(map(str, KS))}"}
    reference = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(runs)
    per_query = result.per_query.set_index("query_id")
    compared = 0
    for qid, ref in reference.items():
        for k in KS:
            for ours, theirs in [("precision", f"P_{k}"), ("recall", f"recall_{k}"), ("ndcg", f"ndcg_cut_{k}"),
                                 ("map", f"map_cut_{k}"), ("hit_rate", f"success_{k}")]:
                assert per_query.loc[qid, f"doc_{ours}_at_{k}"] == pytest.approx(ref[theirs], abs=1e-9), (qid, ours, k)
                compared += 1
    # recip_rank has no cutoff in trec_eval: compare MRR@k with recip_rank of the run cut at k
    for k in KS:
        cut = {q: dict(list(s.items())[:k]) for q, s in runs.items()}
        rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(cut)
        for qid, ref in rr.items():
            assert per_query.loc[qid, f"doc_mrr_at_{k}"] == pytest.approx(ref["recip_rank"], abs=1e-9)
            compared += 1
    assert compared == len(reference) * len(KS) * 6
    # and the run is a real one: MiniLM finds most SciFact claims' abstracts in a 300-document sample
    assert result.metrics["doc_ndcg_at_10"] > 0.6


def test_metric_functions_on_hand_checked_cases():
    ranked = [0, 1, 0, 2]  # grades in rank order
    relevant = [2, 1, 1]  # three relevant documents, one never retrieved
    assert precision_at_k(ranked, relevant, 2) == 0.5
    assert recall_at_k(ranked, relevant, 4) == pytest.approx(2 / 3)
    assert mrr_at_k(ranked, relevant, 1) == 0.0 and mrr_at_k(ranked, relevant, 4) == 0.5
    assert hit_rate_at_k(ranked, relevant, 1) == 0.0 and hit_rate_at_k(ranked, relevant, 2) == 1.0
    assert average_precision_at_k(ranked, relevant, 4) == pytest.approx((1 / 2 + 2 / 4) / 3)
    import math
    dcg = 1 / math.log2(3) + 2 / math.log2(5)
    idcg = 2 + 1 / math.log2(3) + 1 / math.log2(4)
    assert ndcg_at_k(ranked, relevant, 4) == pytest.approx(dcg / idcg)
    assert ndcg_at_k([0, 0], [], 2) == 0.0 and recall_at_k([1], [], 1) == 0.0
