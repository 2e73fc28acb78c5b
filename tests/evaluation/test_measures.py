"""ir_measures-style names in evaluation.metrics: parsed with clear errors, and computed by kbench equal to
ir_measures (which runs pytrec_eval) per query, on a real BM25 run over SciFact. SciFact's judgements are
binary; the graded test gives each judged document a grade from 1 to 3 by a fixed rule (the grades are made
up, the run and the judged pairs are real) so that nDCG's gains and rel= thresholds are exercised."""
from __future__ import annotations

import dataclasses
import hashlib

import ir_measures
import pytest

from kbench.config import EvaluationConfig, load_experiment
from kbench.errors import ConfigError
from kbench.evaluation.measures import parse_measure
from kbench.evaluation.stage import evaluate_rankings
from kbench.runner import run_experiment

NAMES = ["nDCG@10", "nDCG@100", "R@100", "R(rel=2)@10", "RR@10", "RR(rel=3)@100", "P@5", "P(rel=2)@5", "AP@100",
         "AP(rel=2)@100", "Success@10", "Success(rel=3)@10"]


@pytest.fixture(scope="module")
def bm25_run(shared_cache_workspace):
    config = {"name": "measures", "workspace": str(shared_cache_workspace),
              "dataset": {"name": "scifact", "split": "test", "max_documents": 400, "max_queries": 120},
              "chunking": {"strategy": "none"}, "retrieval": {"legs": ["bm25"], "top_k": 100},
              "evaluation": {"k": [10]}}
    return run_experiment(load_experiment(config), progress=False, log=False)


def grade(qid: str, doc_id: str) -> int:
    return 1 + hashlib.sha256(f"{qid}/{doc_id}".encode()).digest()[0] % 3


def compare_with_ir_measures(result, qrels: dict[str, dict[str, int]]) -> int:
    dataset = dataclasses.replace(result.dataset, qrels=qrels)
    per_query = evaluate_rankings(dataset, None, result.run, EvaluationConfig(k=[10], metrics=NAMES))
    per_query = per_query.set_index("query_id")
    run = result.run.to_dict("doc")  # best-chunk score per document, strictly decreasing: no ties to break
    reference = {(m.query_id, str(m.measure)): m.value
                 for m in ir_measures.iter_calc([ir_measures.parse_measure(n) for n in NAMES], qrels, run)}
    compared = 0
    for qid in per_query.index:
        for name in NAMES:
            theirs = reference.get((qid, str(ir_measures.parse_measure(name))), 0.0)
            ours = per_query.loc[qid, "doc_" + parse_measure(name).column]
            assert ours == pytest.approx(theirs, abs=1e-9), (qid, name, ours, theirs)
            compared += 1
    return compared


@pytest.mark.slow
def test_binary_judgements_equal_ir_measures(bm25_run):
    qrels = {q.query_id: bm25_run.dataset.qrels[q.query_id] for q in bm25_run.dataset.queries}
    assert compare_with_ir_measures(bm25_run, qrels) == len(qrels) * len(NAMES)


@pytest.mark.slow
def test_graded_judgements_equal_ir_measures(bm25_run):
    qrels = {q.query_id: {d: grade(q.query_id, d) for d in bm25_run.dataset.qrels[q.query_id]}
             for q in bm25_run.dataset.queries}
    assert {g for rel in qrels.values() for g in rel.values()} == {1, 2, 3}
    assert compare_with_ir_measures(bm25_run, qrels) == len(qrels) * len(NAMES)


def test_names_parse_to_kbench_columns():
    assert parse_measure("nDCG@10").column == "ndcg_at_10"
    assert parse_measure("RR@10").column == "mrr_at_10"
    assert parse_measure("P(rel=2)@5").column == "precision_at_5_rel_2"
    assert parse_measure("Success@10").column == "hit_rate_at_10"
    assert str(parse_measure(" AP(rel=2)@100 ")) == "AP(rel=2)@100"


@pytest.mark.parametrize("name, message", [
    ("ndcg@10", "did you mean nDCG"), ("nDCG", "a cutoff @k is required"), ("MAP@10", "unknown measure 'MAP'"),
    ("nDCG(rel=2)@10", "takes no rel="), ("P(rel=0)@5", "rel=N, a whole grade >= 1"), ("P(foo=1)@5", "rel=N"),
])
def test_bad_names_are_one_clear_config_error(name, message):
    with pytest.raises(ConfigError, match="evaluation.metrics") as caught:
        load_experiment({"name": "x", "dataset": {"name": "demo"}, "evaluation": {"metrics": ["R@10", name]}})
    assert message in str(caught.value)


def test_an_empty_metrics_list_keeps_the_run_key():
    plain = load_experiment({"name": "x", "dataset": {"name": "demo"}})
    listed = load_experiment({"name": "x", "dataset": {"name": "demo"}, "evaluation": {"metrics": []}})
    chosen = load_experiment({"name": "x", "dataset": {"name": "demo"}, "evaluation": {"metrics": ["nDCG@10"]}})
    assert plain.run_key() == listed.run_key() != chosen.run_key()
