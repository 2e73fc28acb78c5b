"""``store.backend: duckdb``: the workspace's DuckDB in production's archon_crawled_pages shape, and a FAISS
index saved beside it.

The rows are synced incrementally (unchanged pages skipped, changed ones rewritten, vanished ones
deleted), read back, and the collection's FAISS index is reopened when it holds exactly those rows, or
built and saved.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from kbench.embedding.stage import EmbeddingResult
from kbench.hashing import sha256_text, stable_hash
from kbench.records import Chunk, Dataset
from kbench.store.config import StoreConfig
from kbench.store.duckdb_store import DuckStore
from kbench.store.faiss_index import load_or_build
from kbench.store.outcome import StoreHandle, StoreOutcome
from kbench.store.registry import STORE_BACKENDS
from kbench.store.sync import Collection


def index_state(chunks: list[Chunk], ids: np.ndarray, namespace: str) -> str:
    """What an index holds: the embedding namespace and, per stored chunk, its position and content."""
    return stable_hash([namespace, [(int(i), chunks[i].doc_id, chunks[i].chunk_number, sha256_text(chunks[i].text))
                                    for i in ids]], length=32)


@STORE_BACKENDS.register("duckdb")
def prepare_duckdb(config: StoreConfig, collection: Collection, dataset: Dataset, chunks: list[Chunk],
                   embedded: EmbeddingResult, workspace: Path) -> StoreOutcome:
    """Sync into the workspace's DuckDB (production's shape), then search a FAISS index saved beside it."""
    ok = np.flatnonzero(embedded.ok_mask)
    db_path = config.duckdb_path(workspace)
    with DuckStore.open(db_path) as store:
        report = store.sync(collection, dataset.documents, chunks, embedded.vectors, embedded.failed)
        ids, stored = store.read_vectors(collection, chunks)
    if not np.array_equal(ids, ok):
        raise RuntimeError(f"{db_path}: collection {collection.name} holds {len(ids)} chunks after sync "
                           f"but the run has {len(ok)} embedded chunks")
    folder = db_path.parent / "faiss" / collection.name
    index, reopened = load_or_build(folder, stored, ids, config, index_state(chunks, ids, collection.embedding_namespace))
    counts = {**report.counts(), "store_index_reopened": int(reopened)}
    return StoreOutcome(index, counts, handle=StoreHandle(collection.name, duckdb_path=db_path), ok_ids=ids,
                        ok_vectors=stored, exact=config.index == "flat")
