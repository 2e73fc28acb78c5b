"""The DuckDB mirror of archon_crawled_pages: width guards, incremental sync, failures, exact search.

Vectors here are seeded random unit vectors: the store is under test, not the model (the runner tests
in test_stage.py store real MiniLM embeddings).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from kbench.chunking import chunk_corpus
from kbench.config import ChunkingConfig, DatasetConfig
from kbench.datasets import load_dataset
from kbench.store.duckdb_store import DuckStore
from kbench.store.sync import Collection, StoreDimensionError, embedding_column, group_pages


def unit_vectors(n: int, dim: int, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def collection(dim: int, model: str = "test-model", name: str | None = None) -> Collection:
    return Collection(name or f"demo-fixed-{dim}", "demo", "fixed", model, dim)


@pytest.fixture(scope="module")
def corpus():
    docs = load_dataset(DatasetConfig(name="demo")).documents[:8]
    chunks = chunk_corpus(docs, ChunkingConfig(strategy="fixed", chunk_size=500, chunk_overlap=50))
    return docs, chunks


@pytest.fixture
def store(tmp_path):
    with DuckStore.open(tmp_path / "stores" / "kbench.duckdb") as s:
        yield s


def test_schema_mirrors_archon_crawled_pages(store):
    cols = {r[0]: r[1] for r in store.con.execute(
        "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'archon_crawled_pages'").fetchall()}
    for name in ("url", "chunk_number", "content", "metadata", "embedding_dimension", "embedding_model",
                 "llm_chat_model", "source_id", "page_id", "created_at", "updated_at", "chunk_start", "chunk_end",
                 "content_hash"):
        assert name in cols
    assert cols["metadata"] == "JSON"
    for dim in (384, 768, 1024, 1536, 3072):
        assert cols[f"embedding_{dim}"] == f"FLOAT[{dim}]"


@pytest.mark.parametrize("dim, wrong_column", [(768, "embedding_1024"), (1024, "embedding_768"),
                                               (384, "embedding_1536")])
def test_writing_into_a_column_of_another_width_is_refused(store, corpus, dim, wrong_column):
    docs, chunks = corpus
    coll = collection(dim, model="some-768-model" if dim == 768 else "some-model")
    store.register_collection(coll)
    pages = group_pages(docs, chunks, np.ones(len(chunks), bool))
    with pytest.raises(StoreDimensionError) as err:
        store.insert_pages(coll, pages, chunks, unit_vectors(len(chunks), dim), {}, column=wrong_column)
    message = str(err.value)
    assert coll.embedding_model in message and str(dim) in message and wrong_column in message
    assert store.count_rows(coll) == 0


def test_vectors_wider_than_the_model_declares_are_refused(store, corpus):
    docs, chunks = corpus
    with pytest.raises(StoreDimensionError, match=r"declares 768 dimensions but its vectors have 1024"):
        store.sync(collection(768), docs, chunks, unit_vectors(len(chunks), 1024), {})
    assert store.count_rows(collection(768)) == 0  # the transaction rolled back


@pytest.mark.parametrize("dim", [768, 1024, 256])
def test_every_width_searches_its_own_column_and_finds_results(store, corpus, dim):
    """The Archon bug (768/1024-d models got empty results) cannot happen: each width has its column,
    search picks the column from the query, and results equal exact numpy cosine top-k."""
    docs, chunks = corpus
    coll = collection(dim)
    vectors = unit_vectors(len(chunks), dim, seed=dim)
    store.sync(coll, docs, chunks, vectors, {})
    assert embedding_column(dim) in store.vector_columns()  # 256 was added on demand
    query = unit_vectors(1, dim, seed=99)[0]
    found = store.vector_search(coll, query, 10)
    expected = np.argsort(-(vectors @ query))[:10]
    assert [(c.doc_id, c.chunk_number) for c in (chunks[i] for i in expected)] == [(p, n) for p, n, _ in found]
    assert np.allclose([s for _, _, s in found], (vectors @ query)[expected], atol=1e-5)
    with pytest.raises(StoreDimensionError, match=f"query vector has 384 dimensions.*{dim}-d"):
        store.vector_search(coll, unit_vectors(1, 384)[0], 10)


def test_sync_skips_unchanged_replaces_changed_deletes_removed(store, corpus):
    docs, chunks = corpus
    coll = collection(384)
    vectors = unit_vectors(len(chunks), 384)
    first = store.sync(coll, docs, chunks, vectors, {})
    assert (first.pages_written, first.rows_written, first.rows_total) == (len(docs), len(chunks), len(chunks))
    again = store.sync(coll, docs, chunks, vectors, {})
    assert (again.pages_written, again.pages_unchanged, again.rows_written, again.rows_deleted) == (0, len(docs), 0, 0)
    created = dict(store.con.execute("SELECT page_id, min(created_at) FROM archon_crawled_pages GROUP BY 1").fetchall())

    # document 0 changes, document 7 disappears
    edited = [replace(docs[0], text=docs[0].text + "\n\nA new closing paragraph about retries.")] + docs[1:7]
    new_chunks = chunk_corpus(edited, ChunkingConfig(strategy="fixed", chunk_size=500, chunk_overlap=50))
    # the embedding cache gives unchanged chunks their old vectors; the changed document's chunks are new
    old_vector = {(c.doc_id, c.chunk_number): v for c, v in zip(chunks, vectors)}
    fresh = unit_vectors(len(new_chunks), 384, seed=1)
    new_vectors = np.stack([fresh[i] if c.doc_id == docs[0].doc_id else old_vector[(c.doc_id, c.chunk_number)]
                            for i, c in enumerate(new_chunks)])
    old_counts = {d.doc_id: sum(c.doc_id == d.doc_id for c in chunks) for d in docs}
    report = store.sync(coll, edited, new_chunks, new_vectors, {})
    assert report.pages_written == 1 and report.pages_unchanged == 6 and report.pages_deleted == 1
    assert report.rows_deleted == old_counts[docs[0].doc_id] + old_counts[docs[7].doc_id]
    assert report.rows_written == sum(c.doc_id == docs[0].doc_id for c in new_chunks)
    assert report.rows_total == len(new_chunks)
    after = dict(store.con.execute("SELECT page_id, min(created_at) FROM archon_crawled_pages GROUP BY 1").fetchall())
    assert all(after[d.doc_id] == created[d.doc_id] for d in docs[1:7])  # unchanged rows untouched
    ids, stored = store.read_vectors(coll, new_chunks)
    assert np.array_equal(ids, np.arange(len(new_chunks))) and np.array_equal(stored, new_vectors)
    assert store.con.execute("SELECT count(*) FROM archon_sources WHERE collection = ?", [coll.name]).fetchone()[0] \
        == len({d.source_id for d in edited})


def test_failed_embeddings_are_recorded_never_stored(store, corpus):
    docs, chunks = corpus
    coll = collection(384)
    vectors = unit_vectors(len(chunks), 384)
    failed = {0: "RateLimitError: quota", 5: "zero or non-finite vector"}
    vectors[0] = 0.0  # what an embedder leaves in a failed row
    vectors[5] = np.nan
    report = store.sync(coll, docs, chunks, vectors, failed)
    assert report.failed_chunks == 2 and report.rows_total == len(chunks) - 2
    column = embedding_column(384)
    assert store.con.execute(f"SELECT count(*) FROM archon_crawled_pages WHERE {column} IS NULL "
                             f"OR list_sum({column}::FLOAT[]) = 0").fetchone()[0] == 0
    recorded = store.failures(coll)
    assert [(p, n) for p, n, _ in recorded] == sorted((chunks[i].doc_id, chunks[i].chunk_number) for i in failed)
    # the same chunks succeeding later rewrite their pages (the page state covers stored chunks)
    healed = store.sync(coll, docs, chunks, unit_vectors(len(chunks), 384), {})
    assert healed.rows_total == len(chunks) and store.failures(coll) == []
    assert healed.pages_written == len({chunks[i].doc_id for i in failed})


def test_an_unflagged_zero_vector_is_refused(store, corpus):
    docs, chunks = corpus
    vectors = unit_vectors(len(chunks), 384)
    vectors[3] = 0.0
    with pytest.raises(ValueError, match="zero or non-finite"):
        store.sync(collection(384), docs, chunks, vectors, {})


def test_collections_do_not_mix(store, corpus):
    docs, chunks = corpus
    a, b = collection(384, name="a"), collection(384, name="b")
    store.sync(a, docs, chunks, unit_vectors(len(chunks), 384), {})
    store.sync(b, docs[:2], [c for c in chunks if c.doc_id in {docs[0].doc_id, docs[1].doc_id}],
               unit_vectors(sum(c.doc_id in {docs[0].doc_id, docs[1].doc_id} for c in chunks), 384), {})
    assert store.count_rows(a) == len(chunks)
    assert store.count_rows(b) < len(chunks)


def store_contents(store) -> dict[str, list[tuple]]:
    """Every kbench table's rows and values (ids and vectors included), timestamps left out."""
    queries = {
        "archon_crawled_pages": "SELECT * EXCLUDE (created_at, updated_at) FROM archon_crawled_pages ORDER BY id",
        "kbench_page_state": "SELECT * EXCLUDE (updated_at) FROM kbench_page_state ORDER BY collection, page_id",
        "kbench_embedding_failures": "SELECT * EXCLUDE (created_at) FROM kbench_embedding_failures "
                                     "ORDER BY collection, page_id, chunk_number",
        "archon_sources": "SELECT * EXCLUDE (created_at, updated_at) FROM archon_sources "
                          "ORDER BY collection, source_id",
    }
    return {table: store.con.execute(sql).fetchall() for table, sql in queries.items()}


@pytest.fixture(scope="module")
def many_chunks():
    """The whole demo corpus in small chunks: more rows than one row group of the store file."""
    docs = load_dataset(DatasetConfig(name="demo")).documents
    return docs, chunk_corpus(docs, ChunkingConfig(strategy="fixed", chunk_size=60, chunk_overlap=0))


def test_a_store_written_in_batches_equals_one_written_at_once(tmp_path, many_chunks):
    """insert_pages writes bounded batches (memory); the file holds the same rows, ids and values as one INSERT,
    through a first sync with failures and a second that rewrites the healed pages and deletes a page."""
    from kbench.store.duckdb_store import STORE_ROW_GROUP_ROWS

    docs, chunks = many_chunks
    assert len(chunks) > STORE_ROW_GROUP_ROWS  # at least one row group goes to the file before COMMIT
    coll = collection(384)
    vectors = unit_vectors(len(chunks), 384)
    failed = {3: "RateLimitError: quota", len(chunks) - 5: "zero or non-finite vector"}
    first = vectors.copy()
    first[list(failed)] = 0.0
    kept = [c for c in chunks if c.doc_id != docs[0].doc_id]
    kept_vectors = vectors[[i for i, c in enumerate(chunks) if c.doc_id != docs[0].doc_id]]
    contents, reports = [], []
    for name, batch_rows in (("at-once", 10**9), ("batched", 97)):
        with DuckStore.open(tmp_path / name / "kbench.duckdb", insert_batch_rows=batch_rows) as store:
            reports.append([store.sync(coll, docs, chunks, first, failed),
                            store.sync(coll, docs[1:], kept, kept_vectors, {})])
        with DuckStore.open(tmp_path / name / "kbench.duckdb") as store:  # reopened: what was committed
            contents.append(store_contents(store))
    assert reports[0] == reports[1]
    assert reports[0][0].rows_written == len(chunks) - 2 and reports[0][1].pages_deleted == 1
    assert reports[0][1].pages_written >= 1  # the healed page(s) were rewritten
    assert contents[0] == contents[1]
    assert len(contents[1]["archon_crawled_pages"]) == len(kept)
    assert contents[0]["kbench_embedding_failures"] == []


def test_a_failure_after_batches_reached_the_file_leaves_nothing(tmp_path, many_chunks, monkeypatch):
    """Full row groups are written to the file before COMMIT; a failure later in the sync rolls them back."""
    docs, chunks = many_chunks
    coll = collection(384)
    path = tmp_path / "kbench.duckdb"

    def crash(self, collection):
        raise RuntimeError("stand-in for a crash after the rows were inserted")

    with DuckStore.open(path, insert_batch_rows=500) as store:
        monkeypatch.setattr(DuckStore, "_refresh_sources", crash)
        with pytest.raises(RuntimeError, match="stand-in"):
            store.sync(coll, docs, chunks, unit_vectors(len(chunks), 384), {})
        assert store_contents(store) == {"archon_crawled_pages": [], "kbench_page_state": [],
                                         "kbench_embedding_failures": [], "archon_sources": []}
    monkeypatch.undo()
    with DuckStore.open(path) as store:
        assert store.count_rows(coll) == 0
        assert store.sync(coll, docs, chunks, unit_vectors(len(chunks), 384), {}).rows_total == len(chunks)
