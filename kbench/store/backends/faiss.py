"""``store.backend: faiss`` (default): an in-memory FAISS index over the run's vectors; nothing persisted."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from kbench.embedding.stage import EmbeddingResult
from kbench.records import Chunk, Dataset
from kbench.store.config import StoreConfig
from kbench.store.faiss_index import VectorIndex
from kbench.store.outcome import StoreOutcome
from kbench.store.registry import STORE_BACKENDS
from kbench.store.sync import Collection


@STORE_BACKENDS.register("faiss")
def prepare_faiss(config: StoreConfig, collection: Collection, dataset: Dataset, chunks: list[Chunk],
                  embedded: EmbeddingResult, workspace: Path) -> StoreOutcome:
    """An in-memory FAISS index over the run's embedded chunks; nothing persisted."""
    ok = np.flatnonzero(embedded.ok_mask)
    vectors = embedded.vectors[ok]
    return StoreOutcome(VectorIndex.build(vectors, config, ids=ok), ok_ids=ok, ok_vectors=vectors,
                        exact=config.index == "flat")
