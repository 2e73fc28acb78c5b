"""TREC run/qrels export and import, and ranx objects: round trips and metric parity with ranx on a real
logged demo run (document and chunk level)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from kbench.config import load_experiment
from kbench.paths import REPO_ROOT
from kbench.records import Chunk, Hit, Run
from kbench.runner import export_run, import_trec_run, run_experiment
from kbench.tracking.export import (TrecFormatError, ranked_ids, read_trec_qrels, read_trec_run,
                                    write_trec_qrels, write_trec_run)
from tests.conftest import link_shared_cache

SMALL_DEMO = {"name": "demo", "max_documents": 1, "max_queries": 6, "seed": 2}


def test_trec_run_round_trip_keeps_order_and_scores(tmp_path):
    run = {"q1": {"a.md": 0.9, "b.md": 0.5, "c.md": 0.7}, "q2": {"a.md": 0.1}}
    path = write_trec_run(run, tmp_path / "run.trec", tag="sys1")
    lines = path.read_text().splitlines()
    assert lines[0] == "q1 Q0 a.md 1 0.9 sys1" and lines[1].startswith("q1 Q0 c.md 2 0.7")
    back, tag = read_trec_run(path)
    assert back == run and tag == "sys1"
    assert ranked_ids(back["q1"]) == ["a.md", "c.md", "b.md"]


def test_qrels_round_trip(tmp_path):
    qrels = {"q1": {"a.md": 1, "b.md": 2}, "q2": {"c.md": 1}}
    assert read_trec_qrels(write_trec_qrels(qrels, tmp_path / "qrels.txt")) == qrels


def test_bad_trec_files_name_the_line(tmp_path):
    bad = tmp_path / "bad.trec"
    bad.write_text("q1 Q0 a 1 0.5 t\nq1 Q0 b 2 high t\n")
    with pytest.raises(TrecFormatError, match=r"bad.trec:2: score 'high'"):
        read_trec_run(bad)
    bad.write_text("q1 Q0 a 1 0.5\n")
    with pytest.raises(TrecFormatError, match="expected 6 fields"):
        read_trec_run(bad)
    bad.write_text("q1 Q0 a 1 0.5 t\nq1 Q0 a 2 0.4 t\n")
    with pytest.raises(TrecFormatError, match="listed twice"):
        read_trec_run(bad)
    with pytest.raises(TrecFormatError, match="whitespace"):
        write_trec_run({"q 1": {"a": 1.0}}, tmp_path / "x.trec")


def test_ties_are_written_strictly_decreasing_and_documents_at_their_best_chunk():
    chunks = [Chunk("a", 0, 0, 5, "x"), Chunk("a", 1, 5, 9, "y"), Chunk("b", 0, 0, 3, "z")]
    run = Run.from_hits({"q1": [Hit(1, 0.8), Hit(2, 0.8), Hit(0, 0.5)]}, chunks)
    for same in (run, Run.from_frame(run.to_frame())):  # a run folder's rankings.parquet reads back equal
        docs = same.to_dict("doc")["q1"]
        assert list(docs) == ["a", "b"] and docs["a"] == 0.8 and docs["b"] < 0.8
        chunk_run = same.to_dict("chunk")["q1"]
        assert ranked_ids(chunk_run) == ["a#1", "b#0", "a#0"]


@pytest.fixture(scope="module")
def logged_run(shared_cache_workspace, tmp_path_factory):
    ws = tmp_path_factory.mktemp("export-ws")
    link_shared_cache(ws, shared_cache_workspace)
    config = {"name": "export", "workspace": str(ws), "dataset": SMALL_DEMO,
              "chunking": {"strategy": "fixed", "chunk_size": 600, "chunk_overlap": 100},
              "retrieval": {"legs": ["vector"], "top_k": 20, "latency": "batch"},
              "evaluation": {"k": [1, 5, 10]}, "tracking": {"experiment": "tests"}}
    return run_experiment(load_experiment(config), progress=False), ws


def _ranx_means(run_file, qrels_file, metrics) -> dict[str, float]:
    """ranx's scores, computed in a fresh process with numba's compiler off (tests/tracking/ranx_means.py says why)."""
    done = subprocess.run([sys.executable, "-m", "tests.tracking.ranx_means", str(run_file), str(qrels_file), *metrics],
                          env={**os.environ, "NUMBA_DISABLE_JIT": "1"}, cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("level", ["doc", "chunk"])
def test_exported_run_scores_the_same_in_ranx(logged_run, tmp_path, level):
    result, ws = logged_run
    paths = export_run(result.run_id, tmp_path, level=level, tracking_uri=result.tracking_uri)
    names = {"ndcg@10": "ndcg_at_10", "recall@10": "recall_at_10", "mrr@10": "mrr_at_10"}
    ours = _ranx_means(paths["run"], paths["qrels"], list(names))
    for ranx_name, kbench_name in names.items():
        assert ours[ranx_name] == pytest.approx(result.metrics[f"{level}_{kbench_name}"], abs=1e-9), ranx_name


def test_import_trec_run_round_trips_doc_metrics_under_its_own_run_key(logged_run, tmp_path):
    from mlflow.tracking import MlflowClient

    result, ws = logged_run
    paths = export_run(result.run_id, tmp_path, level="doc", tracking_uri=result.tracking_uri)
    imported = import_trec_run(paths["run"], result.experiment, name="external")
    for key, value in result.metrics.items():
        if key.startswith("doc_"):
            assert imported.metrics[key] == pytest.approx(value, abs=1e-12), key
    tags = MlflowClient(imported.tracking_uri).get_run(imported.run_id).data.tags
    assert tags["kbench.run_key"].startswith("trec-") and tags["kbench.run_key"] != result.experiment.run_key()
    per_query = pd.read_parquet(imported.run_dir / "per_query.parquet")
    assert list(per_query["query_id"]) == list(result.per_query["query_id"])


def test_import_refuses_a_run_for_another_dataset(logged_run, tmp_path):
    result, _ = logged_run
    other = write_trec_run({"PLAIN-1": {"d1": 1.0}}, tmp_path / "other.trec")
    with pytest.raises(TrecFormatError, match="none of its 1 query ids"):
        import_trec_run(other, result.experiment, log=False)


@pytest.mark.parametrize("content, message", [
    ("q1 Q0 a 1 nan t\n", "not a finite number"),
    ("q1 Q0 a 1 inf t\n", "not a finite number"),
    ("q1 Q0 a 1 0.5 t\nq1 Q0 b 2 -Infinity t\n", ":2: score '-Infinity' is not a finite number"),
])
def test_non_finite_scores_are_refused_with_the_line(tmp_path, content, message):
    path = tmp_path / "bad.trec"
    path.write_text(content)
    with pytest.raises(TrecFormatError, match=message):
        read_trec_run(path)


def test_a_run_file_that_is_not_utf8_names_its_line(tmp_path):
    path = tmp_path / "latin1.trec"
    path.write_bytes("q1 Q0 a 1 0.5 t\nq1 Q0 caf\u00e9 2 0.4 t\n".encode("latin-1"))
    with pytest.raises(TrecFormatError, match=r"latin1\.trec:2: not UTF-8"):
        read_trec_run(path)
