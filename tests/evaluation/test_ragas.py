"""ragas' ID-based context precision/recall against kbench's own metrics on real runs (to 1e-9), where they
coincide and exactly where they differ; the non-LLM metrics offline; a run exported as an EvaluationDataset."""
from __future__ import annotations

import math

import numpy as np
import pytest

from kbench.config import load_experiment
from kbench.evaluation.metrics import precision_at_k, recall_at_k
from kbench.evaluation.ragas_eval import to_ragas_dataset
from kbench.pipeline import run_pipeline

K = 5


def run_with_ragas(workspace, dataset: dict, chunking: dict, metrics: list[str]):
    config = {"name": "ragas", "workspace": str(workspace), "dataset": dataset, "chunking": chunking,
              "retrieval": {"legs": ["bm25"], "top_k": 20},
              "evaluation": {"k": [1, K, 10], "ragas": metrics, "ragas_k": K}}
    return run_pipeline(load_experiment(config), progress=False)


def distinct_docs_at_k(result, query_id: str) -> int:
    return len({h.doc_id for h in result.run[query_id][:K]})


@pytest.mark.parametrize("dataset, chunking", [
    ({"name": "scifact", "split": "test", "max_documents": 400, "max_queries": 120}, {"strategy": "none"}),
    ({"name": "demo"}, {"strategy": "fixed", "chunk_size": 600, "chunk_overlap": 100}),
], ids=["scifact-abstracts", "demo-chunks"])
def test_id_based_context_metrics_agree_with_kbench_where_definitions_coincide(workspace, dataset, chunking):
    """ragas gets the top K chunks and their document ids; it scores the *set* of those ids. With n distinct
    documents among them, that set is exactly kbench's document ranking cut at n, so ragas' precision and
    recall equal kbench's doc precision@n and recall@n to 1e-9. When n = K they are kbench's @K columns.
    When n < K (several chunks of one document) they differ: kbench's doc@K reads K distinct documents,
    deeper in the chunk list, and divides precision by K (trec_eval P_k); ragas stops at the K chunks and
    divides by n. A query with nothing retrieved: ragas NaN, kbench 0."""
    result = run_with_ragas(workspace, dataset, chunking, ["id_context_precision", "id_context_recall"])
    frame = result.per_query.set_index("query_id")
    coincide = differ = 0
    for query in result.dataset.queries:
        row = frame.loc[query.query_id]
        ragas_p, ragas_r = row["ragas_id_context_precision"], row["ragas_id_context_recall"]
        qrels = result.dataset.qrels.get(query.query_id, {})
        ranked = [qrels.get(d, 0) for d in result.run.doc_ids(query.query_id)]
        relevant = [g for g in qrels.values() if g > 0]
        n = distinct_docs_at_k(result, query.query_id)
        if n == 0:
            assert math.isnan(ragas_p) and row[f"doc_precision_at_{K}"] == 0.0
            continue
        assert ragas_p == pytest.approx(precision_at_k(ranked, relevant, n), abs=1e-9), query.query_id
        assert ragas_r == pytest.approx(recall_at_k(ranked, relevant, n), abs=1e-9), query.query_id
        if n == K:
            assert ragas_p == pytest.approx(row[f"doc_precision_at_{K}"], abs=1e-9)
            assert ragas_r == pytest.approx(row[f"doc_recall_at_{K}"], abs=1e-9)
            coincide += 1
        else:
            differ += 1
    assert coincide > 0
    if chunking["strategy"] == "none":
        assert differ == 0  # one chunk per abstract: the top K always holds K documents
        assert result.metrics["ragas_id_context_recall"] == pytest.approx(result.metrics[f"doc_recall_at_{K}"],
                                                                          abs=1e-9)
        assert result.metrics["ragas_id_context_precision"] == pytest.approx(
            result.metrics[f"doc_precision_at_{K}"], abs=1e-9)
    else:
        assert differ > 0  # chunks of one page share a document id: the case where they differ


def test_non_llm_metrics_run_offline_and_the_run_exports_as_an_evaluation_dataset(workspace):
    result = run_with_ragas(workspace, {"name": "demo", "max_queries": 6},
                            {"strategy": "fixed", "chunk_size": 600, "chunk_overlap": 100},
                            ["nonllm_context_precision", "nonllm_context_recall"])
    for name in ("ragas_nonllm_context_precision", "ragas_nonllm_context_recall"):
        values = result.per_query[name].to_numpy(dtype=float)
        assert np.isfinite(values).all() and ((values >= 0) & (values <= 1)).all()
        assert 0 <= result.metrics[name] <= 1
    exported = to_ragas_dataset(result.dataset, result.chunks, result.run, k=K)
    assert len(exported) == len(result.dataset.queries)
    sample, query = exported.samples[0], result.dataset.queries[0]
    hits = result.run[query.query_id][:K]
    texts = {c.chunk_id: c.text for c in result.chunks}
    assert sample.user_input == query.text
    assert sample.retrieved_contexts == [texts[h.chunk_id] for h in hits]
    assert sample.retrieved_context_ids == [h.doc_id for h in hits]
    documents = {d.doc_id: d.text for d in result.dataset.documents}
    spans = result.dataset.spans[query.query_id]
    assert sample.reference_contexts == [documents[s.doc_id][s.start:s.end] for s in spans]
    assert sample.reference_context_ids == [s.doc_id for s in spans]


@pytest.fixture
def chat_server():
    from tests.enrichment.chat_server import start_chat_server

    server = start_chat_server()
    yield server
    server.close()


def test_llm_judged_answers_ragas_cannot_use_are_counted_and_a_stopped_endpoint_ends_the_run(workspace, chat_server,
                                                                                            monkeypatch):
    """A judge that never writes ragas' JSON: the run stops at the first unusable verdict (below the floor of
    usable answers); with allow_partial: NaN per query, each one counted (llm_ragas_unusable_answers), and asked
    once per prompt (ragas' own retry loop is off; its output-fixing prompts still run). An endpoint that
    refuses connections raises instead of turning every score into a quiet NaN."""
    import socket

    from kbench.evaluation.config import EvaluationConfig
    from kbench.evaluation.ragas_eval import evaluate_ragas
    from kbench.llm import EndpointUnreachableError, LLMPolicy, UsageMeter
    from kbench.llm.usable import UnusableAnswersError

    monkeypatch.setenv("KBENCH_TEST_RAGAS_KEY", "sk-test")
    result = run_with_ragas(workspace, {"name": "demo", "max_queries": 3},
                            {"strategy": "fixed", "chunk_size": 600, "chunk_overlap": 100}, [])
    chat_server.reply = lambda prompt: "I think the context is useful."
    config = EvaluationConfig(k=[1, 3], ragas=["id_context_recall", "llm_context_recall"], ragas_k=2,
                              ragas_llm={"base_url": chat_server.base_url, "model": "weak",
                                         "api_key_env": "KBENCH_TEST_RAGAS_KEY", "max_tokens": 32})
    with pytest.raises(UnusableAnswersError, match=r"^evaluation.ragas_llm: 0 of the first 1 \(of 3\) answers usable "
                       r"\(1 unusable, 0 failed\) from model weak, below the floor of 80%"):
        evaluate_ragas(result.dataset, result.chunks, result.run, config, cache_root=workspace / "cache",
                       meter=UsageMeter())
    meter = UsageMeter()
    scores = evaluate_ragas(result.dataset, result.chunks, result.run, config, cache_root=workspace / "cache",
                            meter=meter, policy=LLMPolicy(allow_partial=True))
    assert np.isnan(scores["ragas_llm_context_recall"]).all() and np.isfinite(scores["ragas_id_context_recall"]).all()
    metrics = meter.metrics()
    assert metrics["llm_ragas_unusable_answers"] == 3 and metrics["llm_ragas_failures"] == 0
    assert metrics["llm_ragas_partial"] == 1
    assert len(chat_server.requests) == len(set(chat_server.prompts())) > 0  # nothing asked twice

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = config.model_copy(update={"ragas_llm": config.ragas_llm.model_copy(
        update={"base_url": f"http://127.0.0.1:{port}/v1", "model": "other"})})
    with pytest.raises(EndpointUnreachableError, match="cannot connect"):
        evaluate_ragas(result.dataset, result.chunks, result.run, down, cache_root=workspace / "cache")
