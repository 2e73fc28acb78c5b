"""``store.backend: live``: a production PostgreSQL as it is, read-only (kbench/store/live_store.py).

The run's documents, chunks and vectors are production's rows, its questions come from ``dataset.path``
(questions naming documents by URL or source id), queries are embedded by the model the rows name, and the
``vector`` and ``pg_hybrid`` legs call production's own SQL functions.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from kbench.datasets.config import DatasetConfig
from kbench.datasets.registry import resolve_dataset_path
from kbench.embedding.stage import EmbeddingResult
from kbench.records import Chunk, Dataset
from kbench.store.config import StoreConfig
from kbench.store.live_store import LiveStore, build_live_dataset, dsn_from_env, rebuild_pages
from kbench.store.outcome import StoreHandle, StoredCorpus, StoreOutcome
from kbench.store.pgvector_store import PgVectorIndex
from kbench.store.registry import STORE_BACKENDS, STORED_CORPORA
from kbench.store.sync import Collection


@STORED_CORPORA.register("live")
def load_live_corpus(config: StoreConfig, dataset_config: DatasetConfig, workspace: Path,
                     vector_search: bool) -> StoredCorpus:
    """Open the live store read-only and turn its rows and the question set into the run's corpus."""
    folder, name = resolve_dataset_path(dataset_config)
    store = LiveStore(dsn_from_env(config.dsn_env), config.live_schema, config.allow_write)
    try:
        rows = store.read_rows()
        if vector_search:
            store.check_function("match_archon_crawled_pages")  # fail before any search, not on the first query
        documents, chunks = rebuild_pages(rows)
        dataset = build_live_dataset(folder, documents, rows, f"live:{store.schema}:{name}")
        store.map_rows(chunks)
    except BaseException:
        store.close()
        raise
    counts = {"store_rows_total": len(chunks), "store_live_rows_without_vector": rows.rows_without_vector,
              "store_live_pages_rebuilt_from_offsets": sum(d.metadata["rebuilt_from"] == "offsets"
                                                           for d in documents)}
    outcome = StoreOutcome(PgVectorIndex(store), counts, handle=StoreHandle(f"live-{store.schema}", pg_store=store),
                           close=store.close, ok_ids=np.arange(len(chunks)), ok_vectors=rows.vectors)
    return StoredCorpus(dataset, chunks, rows.vectors, rows.model, outcome, counts)


@STORE_BACKENDS.register("live")
def prepare_live(config: StoreConfig, collection: Collection, dataset: Dataset, chunks: list[Chunk],
                 embedded: EmbeddingResult, workspace: Path) -> StoreOutcome:
    """A live store gives the run its corpus (STORED_CORPORA); the pipeline never hands it a chunked dataset."""
    raise RuntimeError("store.backend live gives the run its index from the store's own rows "
                       "(kbench.store.backends.live.load_live_corpus), never a chunked dataset")
