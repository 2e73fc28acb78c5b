"""Document-level references in a span dataset ({"doc_id"} with no offsets) are document labels: they load,
score at document level, and leave chunk and span columns empty for the questions that have no span."""
from __future__ import annotations

import json

import pytest

from kbench.config import DatasetConfig, EvaluationConfig
from kbench.datasets import DatasetError, load_dataset
from kbench.evaluation.stage import evaluate_rankings
from kbench.records import Chunk, Run, RankedHit

ALPHA = "Alpha explains how queues retry failed jobs with backoff."
BETA = "Beta covers priorities: urgent jobs go first."


def span_folder(tmp_path, questions):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "alpha.md").write_text(ALPHA, encoding="utf-8")
    (tmp_path / "docs" / "beta.md").write_text(BETA, encoding="utf-8")
    (tmp_path / "questions.jsonl").write_text("\n".join(json.dumps(q) for q in questions) + "\n", encoding="utf-8")
    return tmp_path


def test_document_labels_load_and_score_at_document_level(tmp_path):
    start = ALPHA.index("retry")
    folder = span_folder(tmp_path, [
        {"query_id": "q1", "question": "How are jobs retried?",
         "references": [{"doc_id": "alpha.md", "start_index": start, "end_index": start + 5, "content": "retry"}]},
        {"query_id": "q2", "question": "Which jobs go first?", "references": [{"doc_id": "beta.md"}]},
    ])
    dataset = load_dataset(DatasetConfig(path=str(folder)))
    assert [q.query_id for q in dataset.queries] == ["q1", "q2"]
    assert dataset.qrels == {"q1": {"alpha.md": 1}, "q2": {"beta.md": 1}}
    assert set(dataset.spans) == {"q1"}

    chunks = [Chunk("alpha.md", 0, 0, len(ALPHA), ALPHA), Chunk("beta.md", 0, 0, len(BETA), BETA)]
    hits = {c.doc_id: RankedHit(c.chunk_id, c.doc_id, 1.0, c.start, c.end) for c in chunks}
    run = Run({"q1": [hits["alpha.md"], hits["beta.md"]], "q2": [hits["alpha.md"], hits["beta.md"]]})
    frame = evaluate_rankings(dataset, chunks, run, EvaluationConfig(k=[1, 2])).set_index("query_id")
    assert frame.loc["q1", "doc_recall_at_1"] == 1.0 and frame.loc["q1", "chunk_recall_at_1"] == 1.0
    assert frame.loc["q2", "doc_recall_at_1"] == 0.0 and frame.loc["q2", "doc_recall_at_2"] == 1.0
    assert frame.loc["q2", "doc_mrr_at_2"] == 0.5
    assert frame["chunk_recall_at_1"].isna().tolist() == [False, True]  # no span: no chunk-level score
    assert frame["span_recall_at_1"].isna().tolist() == [False, True]


def test_only_document_labels_make_a_document_level_dataset(tmp_path):
    folder = span_folder(tmp_path, [{"query_id": "q1", "question": "Which jobs go first?",
                                     "references": [{"doc_id": "beta.md"}, {"doc_id": "alpha.md"}]}])
    dataset = load_dataset(DatasetConfig(path=str(folder)))
    assert not dataset.has_spans and dataset.qrels == {"q1": {"alpha.md": 1, "beta.md": 1}}


def test_a_document_label_naming_a_missing_document_is_one_clear_error(tmp_path):
    folder = span_folder(tmp_path, [{"query_id": "q1", "question": "?", "references": [{"doc_id": "gamma.md"}]}])
    with pytest.raises(DatasetError, match=r"questions.jsonl:1 references\[0\]: reference names document 'gamma.md'"):
        load_dataset(DatasetConfig(path=str(folder)))


def test_half_an_offset_pair_is_still_refused(tmp_path):
    folder = span_folder(tmp_path, [{"query_id": "q1", "question": "?",
                                     "references": [{"doc_id": "beta.md", "start_index": 0}]}])
    with pytest.raises(DatasetError, match="end_index"):
        load_dataset(DatasetConfig(path=str(folder)))
