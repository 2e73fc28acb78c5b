"""Store backends by config name (``store.backend``).

A backend is a function ``prepare(experiment, dataset, chunks, embedded, embedder, workspace) -> StoreOutcome``
that puts the run's vectors where it keeps them and returns what searches them. Its knobs stay on
``StoreConfig`` (index type, dsn, path), shared by every backend.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from kbench.embedding.stage import CachedEmbedder, EmbeddingResult
from kbench.records import Chunk, Dataset
from kbench.registry import Registry
from kbench.store.outcome import StoredCorpus, StoreOutcome

# (experiment, dataset, chunks, embedded, embedder, workspace); the experiment is untyped because
# kbench.config sits above the store
PrepareStore = Callable[[Any, Dataset, list[Chunk], EmbeddingResult, CachedEmbedder, Path], StoreOutcome]

STORE_BACKENDS: Registry[PrepareStore] = Registry("store.backend")

# Backends that hold the corpus themselves (a live production store): ``load(experiment, workspace)`` gives the run
# its documents, chunks and stored vectors, so the pipeline neither chunks nor embeds the corpus. Each also
# registers in STORE_BACKENDS, whose name check the config uses.
LoadStoredCorpus = Callable[[Any, Path], StoredCorpus]

STORED_CORPORA: Registry[LoadStoredCorpus] = Registry("store.backend")
