"""Data a loader leaves out is counted by reason, reported in the run, and refused under dataset.strict."""
from __future__ import annotations

import json
import logging

import pandas as pd
import pytest

from kbench.config import DatasetConfig, load_experiment
from kbench.datasets import DatasetError, load_dataset
from tests.reliability.inputs import (assert_nothing_written, config, error_lines, make_beir, read_questions,
                                      run_kbench, write_questions, write_yaml)

HEADER = "query-id\tcorpus-id\tscore\n"
QUERIES = [{"_id": "q1", "text": "how are failed jobs retried"}, {"_id": "q2", "text": "which port serves metrics"},
           {"_id": "q3", "text": "   "}, {"_id": "q4", "text": "what holds work"}]

BEIR_DROPS = {
    "qrels_unknown_document": ("q1\td2\t1\nq1\td99\t1\n", ["qrels/test.tsv:3 (document d99)"], ["q1"]),
    "qrels_unknown_query": ("q1\td2\t1\nq77\td2\t1\n", ["qrels/test.tsv:3 (query q77)"], ["q1"]),
    "qrels_not_relevant": ("q1\td2\t1\nq1\td1\t0\nq1\td3\t-1\n", ["qrels/test.tsv:3", "qrels/test.tsv:4"], ["q1"]),
    "qrels_duplicate": ("q1\td2\t1\nq1\td2\t1\n", ["qrels/test.tsv:3"], ["q1"]),
    "empty_query": ("q1\td2\t1\nq3\td1\t1\n", ["queries.jsonl:3 (query q3)"], ["q1"]),
    "no_relevant_judgement": ("q1\td2\t1\nq2\td3\t0\n", ["queries.jsonl:2 (query q2)"], ["q1"]),
}


@pytest.mark.parametrize("reason", sorted(BEIR_DROPS))
def test_beir_drops_are_counted_and_strict_refuses_them(tmp_path, reason, caplog):
    qrels, where, kept = BEIR_DROPS[reason]
    beir = make_beir(tmp_path / "beir", queries=QUERIES, qrels_text=HEADER + qrels)
    with caplog.at_level(logging.WARNING, logger="kbench.datasets.registry"):
        dataset = load_dataset(DatasetConfig(path=str(beir)))
    assert dataset.skipped.get(reason) == where, dataset.skipped
    assert [q.query_id for q in dataset.queries] == kept and dataset.qrels == {"q1": {"d2": 1}}
    assert f"[{reason}]" in caplog.text and "dataset.strict: true refuses them" in caplog.text
    with pytest.raises(DatasetError) as info:
        load_dataset(DatasetConfig(path=str(beir), strict=True))
    assert "dataset.strict refuses" in str(info.value) and f"[{reason}] ({where[0]}" in str(info.value)


def test_a_clean_dataset_reports_nothing(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="kbench.datasets.registry"):
        dataset = load_dataset(DatasetConfig(path=str(make_beir(tmp_path / "beir")), strict=True))
    assert dataset.skipped == {} and caplog.text == ""


@pytest.mark.parametrize("reason, edit", [
    ("no_references", lambda rows: [rows[0] | {"references": []}] + rows[1:]),
    ("empty_query", lambda rows: [rows[0] | {"question": " \n"}] + rows[1:]),
])
def test_span_questions_without_text_or_references_are_counted(demo_copy, reason, edit):
    write_questions(demo_copy, edit(read_questions(demo_copy)))
    dataset = load_dataset(DatasetConfig(path=str(demo_copy)))
    assert dataset.skipped == {reason: ["questions.jsonl:1"]}
    assert len(dataset.queries) == 97 and "q001" not in dataset.spans and "q001" not in dataset.qrels
    with pytest.raises(DatasetError, match=rf"\[{reason}\] \(questions.jsonl:1\)"):
        load_dataset(DatasetConfig(path=str(demo_copy), strict=True))


def test_strict_does_not_change_the_run_key():
    plain = load_experiment({"dataset": {"name": "demo"}})
    strict = load_experiment({"dataset": {"name": "demo", "strict": True}})
    assert plain.run_key() == strict.run_key() and strict.resolved()["dataset"]["strict"] is True


def test_cli_run_reports_every_drop_in_its_counts_and_scores_only_answerable_queries(tmp_path):
    qrels = "q1\td2\t1\nq1\td99\t1\nq77\td2\t1\nq2\td3\t0\nq3\td1\t1\nq4\td1\t1\nq4\td1\t1\n"
    beir = make_beir(tmp_path / "beir", queries=QUERIES, qrels_text=HEADER + qrels)
    workspace = tmp_path / "ws"
    done = run_kbench("run", str(write_yaml(tmp_path / "c.yaml", config(workspace, {"path": str(beir)}))),
                      "--quiet", "--no-log", cwd=tmp_path)
    assert done.code == 0, done.err
    assert "dataset beir: left out" in done.err
    (run_dir,) = (workspace / "runs").iterdir()
    counts = json.loads((run_dir / "stages.json").read_text())["counts"]
    assert {k: v for k, v in counts.items() if k.startswith("skipped_")} == {
        "skipped_qrels_unknown_document": 1, "skipped_qrels_unknown_query": 1, "skipped_qrels_not_relevant": 1,
        "skipped_qrels_duplicate": 1, "skipped_empty_query": 1, "skipped_no_relevant_judgement": 1}
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["count_skipped_qrels_unknown_document"] == 1 and metrics["count_queries"] == 2
    per_query = pd.read_parquet(run_dir / "per_query.parquet")
    assert sorted(per_query["query_id"]) == ["q1", "q4"]


def test_cli_strict_refuses_with_one_line_and_writes_nothing(tmp_path):
    beir = make_beir(tmp_path / "beir", queries=QUERIES, qrels_text=HEADER + "q1\td2\t1\nq1\td99\t1\n")
    workspace = tmp_path / "ws"
    data = config(workspace, {"path": str(beir), "strict": True})
    done = run_kbench("run", str(write_yaml(tmp_path / "c.yaml", data)), "--quiet", cwd=tmp_path)
    assert done.code == 2
    (line,) = error_lines(done.err)
    assert ("dataset.strict refuses 1 judgements naming a document not in the corpus [qrels_unknown_document] "
            "(qrels/test.tsv:3 (document d99))") in line
    assert_nothing_written(workspace)
