"""What the store stage hands to the run: the vector index to search, counts, and a handle on the store.

The two protocols name what the retrieval stage may call; FAISS (``VectorIndex``) and PostgreSQL
(``PgVectorIndex``, ``PgVectorStore``) implement them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol

import numpy as np

from kbench.records import Chunk, Dataset


class VectorSearch(Protocol):
    @property
    def ntotal(self) -> int: ...

    def search(self, queries: np.ndarray, k: int,
               mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (scores, chunk indices) per query, -1 padded; ``mask[i]`` False excludes chunk i."""


class HybridSql(Protocol):
    def hybrid(self, function: str, query_vector: np.ndarray, query_text: str, match_count: int,
               similarity_threshold: float = 0.05, rrf_k: int = 10,
               query_lang: str = "english") -> list[tuple[int, float, str]]:
        """One production hybrid SQL function: [(chunk index, score, match_type)] best first."""


@dataclass(frozen=True)
class StoreHandle:
    """What a leg may use of a production-shaped store (duckdb, pgvector) beyond its vector index."""

    collection: str  # the store's rows of this run's chunking + embedding (kbench.store.sync.Collection)
    duckdb_path: Path | None = None  # backend duckdb: the database file
    pg_store: HybridSql | None = None  # backend pgvector: the open PgVectorStore


@dataclass
class StoreOutcome:
    vector_index: VectorSearch
    counts: dict[str, int] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    handle: StoreHandle | None = None  # None when nothing outlives the run (in-memory faiss)
    close: Callable[[], None] = lambda: None
    ok_ids: np.ndarray | None = None  # chunk indices that have vectors
    ok_vectors: np.ndarray | None = None
    exact: bool = False  # the index returns the exact top-k, so measuring its recall would only cost time


@dataclass
class StoredCorpus:
    """What a backend that holds the corpus itself (``store.backend: live``) gives a run instead of a dataset
    kbench chunks and embeds: the documents and questions, the chunks and vectors as stored, the model that
    made them (queries are embedded with it) and the open store."""

    dataset: Dataset
    chunks: list[Chunk]
    vectors: np.ndarray  # (len(chunks), dim) float32, as stored
    embedding_model: str
    outcome: StoreOutcome
    counts: dict[str, int] = field(default_factory=dict)
