"""The store stage of a run, between embed and search: where the chunk vectors go and what searches them.

- ``faiss`` (default): an in-memory FAISS index over the run's vectors; nothing persisted.
- ``duckdb``: sync the rows into the workspace's DuckDB (production's archon_crawled_pages shape;
  unchanged pages skipped, changed ones rewritten, vanished ones deleted), read the vectors back from
  it and reopen or build the FAISS index saved beside the database for this collection.
- ``pgvector``: sync the rows into PostgreSQL and search through the production SQL functions: the
  ``vector`` leg calls match_archon_crawled_pages through ``PgVectorIndex``, and the ``pg_hybrid`` leg
  calls the hybrid functions through the store handle in ``SearchContext.extras['pg_store']``.

Every backend whose search is not exact FAISS reports the recall@k of its index against exact search
over a seeded sample of the run's queries.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from kbench.hashing import sha256_text, stable_hash
from kbench.records import Chunk, Dataset
from kbench.store.faiss_index import VectorIndex, load_or_build, recall_at_k
from kbench.store.sync import make_collection


@dataclass
class StoreOutcome:
    vector_index: Any
    counts: dict[str, int] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    extras: dict[str, Any] = field(default_factory=dict)
    close: Callable[[], None] = lambda: None
    ok_ids: np.ndarray | None = None  # chunk indices that have vectors
    ok_vectors: np.ndarray | None = None


def default_duckdb_path(workspace: Path) -> Path:
    return workspace / "stores" / "kbench.duckdb"


def index_state(chunks: list[Chunk], ids: np.ndarray, namespace: str) -> str:
    """What an index holds: the embedding namespace and, per stored chunk, its position and content."""
    return stable_hash([namespace, [(int(i), chunks[i].doc_id, chunks[i].chunk_number, sha256_text(chunks[i].text))
                                    for i in ids]], length=32)


def prepare_store(experiment, dataset: Dataset, chunks: list[Chunk], embedded, embedder,
                  workspace: Path) -> StoreOutcome:
    config = experiment.store
    vectors, failed = embedded.vectors, embedded.failed
    ok = np.flatnonzero(embedded.ok_mask)
    if config.backend == "faiss":
        outcome = StoreOutcome(VectorIndex.build(vectors[ok], config, ids=ok), ok_ids=ok, ok_vectors=vectors[ok])
        return outcome
    collection = make_collection(experiment, embedder.cache.namespace, vectors.shape[1])
    if config.backend == "duckdb":
        from kbench.store.duckdb_store import DuckStore

        db_path = Path(config.path).expanduser() if config.path else default_duckdb_path(workspace)
        with DuckStore.open(db_path) as store:
            report = store.sync(collection, dataset.documents, chunks, vectors, failed)
            ids, stored = store.read_vectors(collection, chunks)
        if not np.array_equal(ids, ok):
            raise RuntimeError(f"{db_path}: collection {collection.name} holds {len(ids)} chunks after sync "
                               f"but the run has {len(ok)} embedded chunks")
        folder = db_path.parent / "faiss" / collection.name
        index, reopened = load_or_build(folder, stored, ids, config, index_state(chunks, ids, embedder.cache.namespace))
        counts = {**report.counts(), "store_index_reopened": int(reopened)}
        return StoreOutcome(index, counts, ok_ids=ids, ok_vectors=stored,
                            extras={"store_collection": collection.name, "store_path": str(db_path)})
    # pgvector
    from kbench.store.pgvector_store import PgVectorIndex, PgVectorStore

    store = PgVectorStore(collection, dsn=config.dsn, datadir=config.pg_datadir)
    try:
        report = store.sync(collection, dataset.documents, chunks, vectors, failed)
        store.apply_index(config)
        store.load_id_map(chunks)
    except BaseException:
        store.close()
        raise
    return StoreOutcome(PgVectorIndex(store), report.counts(), close=store.close, ok_ids=ok, ok_vectors=vectors[ok],
                        extras={"pg_store": store, "store_collection": collection.name})


def needs_recall_check(config) -> bool:
    exact_faiss = config.backend in ("faiss", "duckdb") and config.index == "flat"
    return config.recall_sample_queries > 0 and not exact_faiss


def index_recall(outcome: StoreOutcome, queries: list, embed_queries, config, seed: int = 0) -> dict[str, float]:
    """recall@k of the store's index against exact search, on a seeded sample of the run's queries."""
    sample = list(queries)
    if len(sample) > config.recall_sample_queries:
        sample = random.Random(seed).sample(sample, config.recall_sample_queries)
    if not sample or outcome.ok_ids is None or len(outcome.ok_ids) == 0:
        return {}
    query_vectors = embed_queries([q.text for q in sample])
    recall = recall_at_k(outcome.vector_index, outcome.ok_vectors, outcome.ok_ids, query_vectors, config.recall_k)
    return {f"index_recall_at_{config.recall_k}": recall, "index_recall_queries": float(len(sample))}
