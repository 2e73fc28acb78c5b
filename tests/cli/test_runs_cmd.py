"""kbench runs: the newest runs with their headline metrics; kbench runs show: one run, and with --misses the
questions it missed, their reference text and what it returned instead, rebuilt from the logged config."""
from __future__ import annotations

import re

import pandas as pd
import pytest
import yaml
from mlflow.tracking import MlflowClient

from kbench.cli import main
from kbench.config import load_experiment
from kbench.datasets import load_dataset
from kbench.pipeline import chunked_dataset


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def run_logged(tmp_path, workspace, config: dict, capsys):
    """Run ``config`` through `kbench run`; (config path, MLflow run, run folder, tracking uri)."""
    path = tmp_path / f"{config['name']}.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    assert main(["run", str(path), "--quiet"]) == 0
    capsys.readouterr()
    uri = f"sqlite:///{workspace / 'mlflow.db'}"
    client = MlflowClient(uri)
    (run,) = [r for r in client.search_runs([client.get_experiment_by_name("tests").experiment_id])
              if r.data.tags["mlflow.runName"] == config["name"]]
    run_dir = next(p for p in (workspace / "runs").iterdir() if p.name.split("-", 1)[1].startswith(config["name"]))
    return path, run, run_dir, uri


@pytest.fixture
def span_run(tmp_path, workspace, config_for, capsys):
    # top_k 1 scored at @10: some questions find nothing relevant, so there are misses to read
    config = config_for(name="few-results", dataset={"name": "demo", "max_queries": 10, "max_documents": 2, "seed": 4},
                        retrieval={"legs": ["vector"], "top_k": 1, "latency": "batch"})
    return run_logged(tmp_path, workspace, config, capsys)


def test_runs_lists_the_newest_runs_with_their_headline_metrics(span_run, tmp_path, capsys):
    _, run, _, uri = span_run
    assert main(["runs", "--tracking-uri", uri]) == 0
    out = capsys.readouterr().out
    header, _, row, *rest = out.splitlines()
    assert header.split()[:5] == ["run", "started", "experiment", "name", "(sweep"]
    cells = re.split(r"\s{2,}", row.strip())
    metrics = run.data.metrics
    assert cells[0] == run.info.run_id[:12] and cells[2] == "tests" and cells[3] == "few-results"
    assert cells[4] == "FINISHED" and cells[5] == "chunk@10"
    assert cells[6:10] == [f"{metrics['chunk_ndcg_at_10']:.4f}", f"{metrics['chunk_recall_at_10']:.4f}",
                           f"{metrics['chunk_mrr_at_10']:.4f}", str(int(metrics["count_queries"]))]
    assert main(["runs", "--tracking-uri", f"sqlite:///{tmp_path / 'empty.db'}"]) == 0
    assert capsys.readouterr().out.startswith("no runs in")


def test_runs_show_counts_misses_and_misses_lists_them_with_references(span_run, capsys):
    path, run, run_dir, uri = span_run
    per_query = pd.read_parquet(run_dir / "per_query.parquet")
    missed = per_query[per_query["chunk_recall_at_10"] == 0]
    assert 0 < len(missed) < len(per_query)

    assert main(["runs", "show", run.info.run_id[:8], "--tracking-uri", uri]) == 0  # a prefix is enough
    out = capsys.readouterr().out
    assert out.startswith(f"run {run.info.run_id}: few-results")
    assert "chunk-level" in out and "span-level" in out and "chunking   strategy=fixed" in out
    assert f"misses: {len(missed)} of {len(per_query)} queries have chunk_recall_at_10 = 0" in out

    assert main(["runs", "show", run.info.run_id, "--misses", "--limit", "100", "--tracking-uri", uri]) == 0
    out = capsys.readouterr().out
    assert (f"misses: {len(missed)} of {len(per_query)} queries (chunk_recall_at_10 = 0: no chunk overlapping a "
            "reference span in the top 10)") in out
    experiment = load_experiment(path)  # the dataset and chunks, rebuilt here independently
    dataset, chunks = chunked_dataset(experiment.dataset, experiment.chunking)
    questions = {q.query_id: q.text for q in dataset.queries}
    texts = {d.doc_id: d.text for d in dataset.documents}
    chunk_text = {c.chunk_id: c.text for c in chunks}
    out = out[out.index("misses: "):]
    printed = set(re.findall(r"^(\S+)  ", out, flags=re.M))
    assert printed == set(missed["query_id"])  # every miss and nothing else
    for _, row in missed.iterrows():
        block = out[out.index(f"\n{row['query_id']}  "):]
        assert _flat(questions[row["query_id"]])[:60] in block
        for ref in row["span_refs"]:  # the reference text itself
            assert _flat(texts[ref["doc_id"]][ref["start"]:ref["end"]])[:60] in block
            assert f"{ref['doc_id']} [{ref['start']}:{ref['end']}]" in block
        first = row["retrieved"][0]  # what it returned instead, with its text
        assert f"1. {first} (score {row['scores'][0]:.4f})" in block
        assert _flat(chunk_text[first])[:60] in block


def test_runs_show_misses_on_a_document_qrels_dataset(tmp_path, workspace, config_for, capsys):
    config = config_for(name="scifact-top1", dataset={"name": "scifact", "max_queries": 8, "max_documents": 60,
                                                      "seed": 1},
                        retrieval={"legs": ["bm25"], "top_k": 1, "latency": "batch"})
    config["chunking"] = {"strategy": "none"}  # one chunk per abstract
    path, run, run_dir, uri = run_logged(tmp_path, workspace, config, capsys)
    per_query = pd.read_parquet(run_dir / "per_query.parquet")
    missed = per_query[per_query["doc_recall_at_10"] == 0]
    assert len(missed) > 0
    assert main(["runs", "show", run.info.run_id, "--misses", "--tracking-uri", uri]) == 0
    out = capsys.readouterr().out
    assert f"misses: {len(missed)} of {len(per_query)} queries (doc_recall_at_10 = 0: no relevant document" in out
    loaded = load_dataset(load_experiment(path).dataset)
    for _, row in missed.head(10).iterrows():
        block = out[out.index(f"\n{row['query_id']}  "):]
        relevant = [d for d, grade in loaded.qrels[row["query_id"]].items() if grade > 0]
        assert f"{relevant[0]} (grade" in block


def test_an_unknown_run_is_one_line_and_exit_2(span_run, capsys):
    _, _, _, uri = span_run
    with pytest.raises(SystemExit) as info:
        main(["runs", "show", "0123456789abcdef", "--tracking-uri", uri])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "run '0123456789abcdef' not found" in err and "kbench runs" in err
