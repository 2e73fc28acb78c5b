"""What both production-shaped stores share before writing: the rows of a batch, checked once."""
from __future__ import annotations

import numpy as np
import pytest

from kbench.chunking import chunk_corpus
from kbench.config import ChunkingConfig, DatasetConfig
from kbench.datasets import load_dataset
from kbench.hashing import sha256_text
from kbench.store.duckdb_store import DuckStore
from kbench.store.sync import Collection, group_pages, page_batch


@pytest.fixture(scope="module")
def corpus():
    docs = load_dataset(DatasetConfig(name="demo")).documents[:4]
    chunks = chunk_corpus(docs, ChunkingConfig(strategy="fixed", chunk_size=500, chunk_overlap=50))
    return docs, chunks


def unit_rows(n: int, dim: int) -> np.ndarray:
    v = np.random.default_rng(1).normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_page_batch_holds_the_embedded_rows_and_the_failures(corpus):
    docs, chunks = corpus
    ok = np.ones(len(chunks), bool)
    ok[1] = False
    pages = group_pages(docs, chunks, ok)
    vectors = unit_rows(len(chunks), 8)
    batch = page_batch(Collection("c", "demo", "fixed", "m", 8), pages, chunks, vectors, {1: "timeout"})
    assert batch.column == "embedding_8"
    assert len(batch.vectors) == len(batch.columns["content"]) == len(chunks) - 1
    assert np.array_equal(batch.vectors[0], vectors[0]) and np.array_equal(batch.vectors[1], vectors[2])
    assert batch.failed == [(chunks[1].doc_id, chunks[1].chunk_number, sha256_text(chunks[1].text), "timeout")]


def test_a_zero_vector_not_recorded_as_failed_is_refused_and_nothing_is_written(corpus, tmp_path):
    docs, chunks = corpus
    vectors = unit_rows(len(chunks), 8)
    vectors[2] = 0.0
    collection = Collection("c", "demo", "fixed", "m", 8)
    with DuckStore.open(tmp_path / "kbench.duckdb") as store:
        with pytest.raises(ValueError, match="refusing to store a zero or non-finite vector"):
            store.sync(collection, docs, chunks, vectors, {})
        assert store.count_rows(collection) == 0
