"""BEIR-style parquet tables, a Hugging Face ``datasets`` folder and AutoRAG's corpus.parquet/qa.parquet load
as the same dataset as SciFact's own BEIR files (real data, written into each layout here)."""
from __future__ import annotations

import pandas as pd
import pytest

from kbench.config import DatasetConfig
from kbench.datasets import DatasetError, load_dataset


@pytest.fixture(scope="module")
def scifact():
    return load_dataset(DatasetConfig(name="scifact", split="test"))


def frames(dataset):
    corpus = pd.DataFrame([{"_id": d.doc_id, "title": d.title, "text": d.text} for d in dataset.documents])
    queries = pd.DataFrame([{"_id": q.query_id, "text": q.text} for q in dataset.queries])
    qrels = pd.DataFrame([{"query-id": q, "corpus-id": d, "score": g}
                          for q, docs in dataset.qrels.items() for d, g in docs.items()])
    return corpus, queries, qrels


def same(loaded, reference):
    assert [q.query_id for q in loaded.queries] == [q.query_id for q in reference.queries]
    assert [q.text for q in loaded.queries] == [q.text for q in reference.queries]
    assert loaded.qrels == reference.qrels
    assert [(d.doc_id, d.title, d.text) for d in loaded.documents] == \
        [(d.doc_id, d.title, d.text) for d in reference.documents]


def test_parquet_tables_load_like_the_beir_files(tmp_path, scifact):
    corpus, queries, qrels = frames(scifact)
    corpus.to_parquet(tmp_path / "corpus.parquet")
    queries.to_parquet(tmp_path / "queries.parquet")
    (tmp_path / "qrels").mkdir()
    qrels.to_parquet(tmp_path / "qrels" / "test.parquet")
    same(load_dataset(DatasetConfig(path=str(tmp_path), split="test")), scifact)
    with pytest.raises(DatasetError, match=r"no judgements for split 'dev'.*qrels/dev.parquet"):
        load_dataset(DatasetConfig(path=str(tmp_path), split="dev"))


def test_a_hugging_face_datasets_folder_loads(tmp_path, scifact):
    datasets = pytest.importorskip("datasets")
    corpus, queries, qrels = frames(scifact)
    datasets.Dataset.from_pandas(corpus).save_to_disk(str(tmp_path / "corpus"))
    datasets.Dataset.from_pandas(queries).save_to_disk(str(tmp_path / "queries"))
    datasets.DatasetDict({"test": datasets.Dataset.from_pandas(qrels)}).save_to_disk(str(tmp_path / "qrels"))
    assert list((tmp_path / "corpus").glob("*.arrow"))  # the real on-disk form: Arrow files and JSON metadata
    same(load_dataset(DatasetConfig(path=str(tmp_path), split="test")), scifact)


def test_graded_judgements_keep_their_grades_and_zero_is_not_relevant(tmp_path, scifact):
    corpus, queries, qrels = frames(scifact)
    qrels["score"] = [(i % 4) for i in range(len(qrels))]  # grades 0-3 (made up; the pairs are SciFact's)
    corpus.to_parquet(tmp_path / "corpus.parquet")
    queries.to_parquet(tmp_path / "queries.parquet")
    (tmp_path / "qrels").mkdir()
    qrels.to_parquet(tmp_path / "qrels" / "test.parquet")
    loaded = load_dataset(DatasetConfig(path=str(tmp_path), split="test"))
    kept = qrels[qrels["score"] > 0]
    assert sum(len(d) for d in loaded.qrels.values()) == len(kept)
    assert {g for d in loaded.qrels.values() for g in d.values()} == {1, 2, 3}
    assert len(loaded.skipped["qrels_not_relevant"]) == int((qrels["score"] == 0).sum())


def test_autorag_corpus_and_qa_load(tmp_path, scifact):
    corpus, queries, _ = frames(scifact)
    pd.DataFrame({"doc_id": corpus["_id"], "contents": corpus["text"],
                  "metadata": [{"last_modified_datetime": "2024-01-01"}] * len(corpus)}).to_parquet(
        tmp_path / "corpus.parquet")
    pd.DataFrame({"qid": queries["_id"], "query": queries["text"],
                  "retrieval_gt": [[[d] for d in scifact.qrels[q]] for q in queries["_id"]],
                  "generation_gt": [["an answer"]] * len(queries)}).to_parquet(tmp_path / "qa.parquet")
    loaded = load_dataset(DatasetConfig(path=str(tmp_path)))
    assert loaded.qrels == {q: {d: 1 for d in docs} for q, docs in scifact.qrels.items()}
    assert [d.text for d in loaded.documents] == [d.text for d in scifact.documents]


def test_a_table_without_an_id_column_is_one_clear_error(tmp_path):
    pd.DataFrame({"name": ["a"], "text": ["x"]}).to_parquet(tmp_path / "corpus.parquet")
    pd.DataFrame({"_id": ["q"], "text": ["?"]}).to_parquet(tmp_path / "queries.parquet")
    (tmp_path / "qrels").mkdir()
    pd.DataFrame({"query-id": ["q"], "corpus-id": ["a"], "score": [1]}).to_parquet(tmp_path / "qrels" / "test.parquet")
    with pytest.raises(DatasetError, match=r"corpus row 1: no document id column; expected one of _id, doc_id"):
        load_dataset(DatasetConfig(path=str(tmp_path)))
