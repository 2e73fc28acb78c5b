"""Store backends by config name (``store.backend``).

A backend is a function ``prepare(config, collection, dataset, chunks, embedded, workspace) -> StoreOutcome`` that
puts the run's chunk vectors where it keeps them and returns what searches them. It receives the store section
and the collection the chunks belong to (kbench/store/sync.py: named from the dataset, chunking, enrichment and
embedding sections), never the whole experiment. Its knobs stay on ``StoreConfig`` (index type, dsn, path),
shared by every backend.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from kbench.registry import Registry

if TYPE_CHECKING:  # annotations only: store/config.py (the config layer) imports this registry to check names
    from kbench.store.outcome import StoredCorpus, StoreOutcome

# (config: StoreConfig, collection: Collection, dataset: Dataset, chunks: list[Chunk], embedded: EmbeddingResult,
# workspace: Path); written out here, not typed, because store/config.py imports this registry to check names
PrepareStore = Callable[..., "StoreOutcome"]

# A new backend: its module in backends/ and its line here (kbench/registry.py: imported on first use).
STORE_BACKENDS: Registry[PrepareStore] = Registry("store.backend", {
    "duckdb": "kbench.store.backends.duckdb",
    "faiss": "kbench.store.backends.faiss",
    "live": "kbench.store.backends.live",
    "pgvector": "kbench.store.backends.pgvector",
})

# Backends that hold the corpus themselves (a live production store): ``load(config, dataset, workspace,
# vector_search)`` gives the run its documents, chunks and stored vectors, so the pipeline neither chunks nor
# embeds the corpus (``vector_search``: a leg will call the store's vector search, so check it exists first).
# Each also registers in STORE_BACKENDS, whose name check the config uses.
LoadStoredCorpus = Callable[..., "StoredCorpus"]  # (config: StoreConfig, dataset: DatasetConfig, workspace, bool)

STORED_CORPORA: Registry[LoadStoredCorpus] = Registry("store.backend", {"live": "kbench.store.backends.live"})
