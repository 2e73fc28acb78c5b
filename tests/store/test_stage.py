"""The store stage inside real runs: caches make re-runs embed nothing, DuckDB rows and the saved FAISS index
are reused, the index's recall is reported."""
from __future__ import annotations

import duckdb
import pytest

from kbench.chunking import chunk_corpus
from kbench.config import load_experiment
from kbench.datasets import load_dataset
from kbench.hashing import sha256_text
from kbench.runner import run_experiment


@pytest.mark.slow
def test_sweep_reuses_embeddings_rows_and_index(config_for, workspace):
    base = config_for(dataset={"name": "demo", "max_documents": 10, "max_queries": 12},
                      store={"backend": "duckdb", "index": "hnsw"},
                      retrieval={"legs": ["vector"], "top_k": 20, "latency": "batch"},
                      tracking={"enabled": False})
    experiment = load_experiment(base)
    dataset = load_dataset(experiment.dataset)
    texts = {sha256_text(c.text) for c in chunk_corpus(dataset.documents, experiment.chunking)}

    first = run_experiment(experiment, progress=False, log=False)
    c1 = first.counts
    assert c1["embeddings_computed"] + c1["embeddings_cached"] == len(texts)
    assert c1["store_rows_total"] == c1["chunks"] and c1["embeddings_failed"] == 0
    assert 0 < first.metrics["index_recall_at_10"] <= 1 and first.metrics["index_recall_queries"] == 12

    # only retrieval settings change: nothing is chunked, embedded, written or indexed again
    second = run_experiment(load_experiment({**base, "retrieval": {**base["retrieval"], "top_k": 5}}),
                            progress=False, log=False)
    c2 = second.counts
    assert (c2["embeddings_computed"], c2["embeddings_cached"]) == (0, len(texts))
    assert (c2["chunk_cache_misses"], c2["chunk_cache_hits"]) == (0, len(dataset.documents))
    assert (c2["store_pages_written"], c2["store_pages_unchanged"]) == (0, len(dataset.documents))
    assert c2["store_index_reopened"] == 1

    # a new chunker embeds only the texts it adds
    other = {**base, "chunking": {"strategy": "fixed", "chunk_size": 400, "chunk_overlap": 0}}
    other_texts = {sha256_text(c.text) for c in chunk_corpus(dataset.documents, load_experiment(other).chunking)}
    third = run_experiment(load_experiment(other), progress=False, log=False)
    # the session-wide cache may already hold some of these texts (other tests embed the demo set too)
    assert third.counts["embeddings_computed"] + third.counts["embeddings_cached"] == len(other_texts)
    assert third.counts["embeddings_computed"] <= len(other_texts - texts)
    # every document chunked anew or read from the cache (the session's cache may hold this chunking already)
    assert third.counts["chunk_cache_misses"] + third.counts["chunk_cache_hits"] == len(dataset.documents)

    # the rows are in the workspace's DuckDB, in production's shape, one collection per chunking
    con = duckdb.connect(str(workspace / "stores" / "kbench.duckdb"), read_only=True)
    per_collection = dict(con.execute("SELECT collection, count(*) FROM archon_crawled_pages GROUP BY 1").fetchall())
    con.close()
    assert sorted(per_collection.values()) == sorted([c1["chunks"], third.counts["chunks"]])
    assert list((workspace / "stores" / "faiss").glob("*/hnsw-*.faiss"))
