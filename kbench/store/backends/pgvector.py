"""``store.backend: pgvector``: the rows in PostgreSQL, searched through the production SQL functions.

The ``vector`` leg calls match_archon_crawled_pages through ``PgVectorIndex``; the ``pg_hybrid`` leg calls
the hybrid functions through ``StoreHandle.pg_store``. The store stays open for the search and is closed
by ``StoreOutcome.close``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from kbench.embedding.stage import EmbeddingResult
from kbench.records import Chunk, Dataset
from kbench.store.config import StoreConfig
from kbench.store.outcome import StoreHandle, StoreOutcome
from kbench.store.pgvector_store import PgVectorIndex, PgVectorStore
from kbench.store.registry import STORE_BACKENDS
from kbench.store.sync import Collection


@STORE_BACKENDS.register("pgvector")
def prepare_pgvector(config: StoreConfig, collection: Collection, dataset: Dataset, chunks: list[Chunk],
                     embedded: EmbeddingResult, workspace: Path) -> StoreOutcome:
    """Sync into PostgreSQL + pgvector and search with the production SQL functions."""
    ok = np.flatnonzero(embedded.ok_mask)
    store = PgVectorStore(collection, dsn=config.dsn, datadir=config.pg_datadir)
    try:
        report = store.sync(collection, dataset.documents, chunks, embedded.vectors, embedded.failed)
        store.apply_index(config)
        store.load_id_map(chunks)
    except BaseException:
        store.close()
        raise
    # exact stays False even for store.index flat: the recall check is what verifies pgvector's
    # arithmetic against numpy's exact search
    return StoreOutcome(PgVectorIndex(store), report.counts(), handle=StoreHandle(collection.name, pg_store=store),
                        close=store.close, ok_ids=ok, ok_vectors=embedded.vectors[ok])
