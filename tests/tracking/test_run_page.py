"""A logged run's MLflow page: its plots, the per-query results table (question, top hit) that MLflow itself
reads back as a table, the config's description with rounded metrics, the real start and end times, and the
workspace actually used; its export in AutoRAG's layout. A real run (BM25 over the demo set, no model) logged to
a real MLflow store."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from kbench.config import DatasetConfig, load_experiment
from kbench.datasets import load_dataset
from kbench.runner import export_run, run_experiment
from kbench.tracking.mlflow_run import logged_value
from kbench.tracking.read import tracking_client
from kbench.tracking.run_page import MLFLOW_TABLE_TAG, RESULTS_TABLE


@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    workspace = tmp_path_factory.mktemp("run-page-ws")
    experiment = load_experiment({
        "name": "page", "workspace": str(workspace), "description": "BM25 alone on the demo set.",
        "dataset": {"name": "demo", "max_queries": 12}, "chunking": {"strategy": "fixed", "chunk_size": 600},
        "retrieval": {"legs": ["bm25"], "top_k": 10}, "evaluation": {"k": [1, 5, 10]},
        "tracking": {"experiment": "run-page"},
    })
    result = run_experiment(experiment, progress=False)
    return result, tracking_client(result.tracking_uri), workspace


def test_plots_and_results_table_are_artifacts_mlflow_reads_as_a_table(logged, monkeypatch):
    result, client, _ = logged
    monkeypatch.setenv("MLFLOW_TRACKING_URI", result.tracking_uri)  # load_table searches through the fluent API
    run = client.get_run(result.run_id)
    artifacts = {a.path for a in client.list_artifacts(result.run_id)}
    plots = {a.path for a in client.list_artifacts(result.run_id, "plots")}
    assert RESULTS_TABLE in artifacts
    assert plots == {"plots/metrics_by_k.png", "plots/latency_per_stage.png", "plots/per_query_distribution.png"}
    assert json.loads(run.data.tags[MLFLOW_TABLE_TAG]) == [{"path": RESULTS_TABLE, "type": "table"}]
    table = client.load_table(run.info.experiment_id, RESULTS_TABLE, run_ids=[result.run_id])
    questions = {q.query_id: q.text for q in result.dataset.queries}
    assert len(table) == 12 and list(table["question"]) == [questions[q] for q in table["query_id"]]
    texts = {c.chunk_id: " ".join(c.text.split()) for c in result.chunks}
    for qid, top_hit, top_doc in zip(table["query_id"], table["top_hit"], table["top_doc_id"]):
        first = result.run.hits[qid][0]
        assert top_doc == first.doc_id and texts[first.chunk_id].startswith(top_hit.rstrip("…"))
    assert {"chunk_ndcg_at_10", "chunk_recall_at_10", "references"} <= set(table.columns)


def test_description_times_and_workspace(logged):
    result, client, workspace = logged
    run = client.get_run(result.run_id)
    note = run.data.tags["mlflow.note.content"]
    assert note.startswith("BM25 alone on the demo set.")
    assert f"| ndcg | {result.metrics['chunk_ndcg_at_1']:.4f} |" in note  # rounded where it is shown
    # at 10 significant digits where it is kept (issue 42: no 0.20000000000000004 on the page); exact in the folder
    assert run.data.metrics["chunk_ndcg_at_10"] == logged_value(result.metrics["chunk_ndcg_at_10"])
    assert abs(run.data.metrics["chunk_ndcg_at_10"] - result.metrics["chunk_ndcg_at_10"]) < 1e-9
    stages = json.loads((result.run_dir / "stages.json").read_text())
    assert (run.info.start_time, run.info.end_time) == (stages["started_ms"], stages["ended_ms"])
    assert (run.info.end_time - run.info.start_time) / 1000 >= sum(result.stage_seconds.values()) * 0.99
    assert run.data.params["workspace"] == str(workspace.resolve())


@pytest.mark.parametrize("level", ["doc", "chunk"])
def test_autorag_export_round_trips_and_scores_like_the_run(logged, tmp_path, level):
    result, _, _ = logged
    paths = export_run(result.run_id, tmp_path / level, level=level, tracking_uri=result.tracking_uri, format="autorag")
    assert {p.name for p in paths.values()} == {"corpus.parquet", "qa.parquet", "retrieval.parquet"}
    qa = pd.read_parquet(paths["qa"]).set_index("qid")
    retrieval = pd.read_parquet(paths["retrieval"]).set_index("qid")
    recall = [len({g[0] for g in qa.loc[q, "retrieval_gt"]} & set(retrieval.loc[q, "retrieved_ids"][:10]))
              / len(qa.loc[q, "retrieval_gt"]) for q in qa.index]
    assert sum(recall) / len(recall) == pytest.approx(result.metrics[f"{level}_recall_at_10"], abs=1e-12)
    assert all(len(refs) for refs in qa["generation_gt"])  # the demo set's reference spans, as text
    if level == "doc":  # kbench reads AutoRAG's layout back: the same questions and judgements
        back = load_dataset(DatasetConfig(path=str(tmp_path / level)))
        assert back.qrels == {q: dict(d) for q, d in result.dataset.qrels.items()}
        assert [q.text for q in back.queries] == [q.text for q in result.dataset.queries]
