"""The store stage of a run, between embed and search: where the chunk vectors go and what searches them.

``store.backend`` names a registered backend (kbench/store/backends: faiss in memory, the DuckDB mirror
of production's schema with a saved FAISS index, or pgvector with the production SQL functions); each
returns a ``StoreOutcome`` whose vector index the ``vector`` leg searches and whose ``StoreHandle`` the
pipeline puts in ``SearchContext.store``.

Every backend whose search is not exact FAISS reports the recall@k of its index against exact search
over a seeded sample of the run's queries.
"""
from __future__ import annotations

import random
from pathlib import Path

from kbench.embedding.stage import EmbeddingResult
from kbench.records import Chunk, Dataset
from kbench.store.config import StoreConfig
from kbench.store.duckdb_store import check_store_file
from kbench.store.faiss_index import faiss_module, recall_at_k
from kbench.store.outcome import StoreOutcome
from kbench.store.pgvector_store import check_server
from kbench.store.registry import STORE_BACKENDS
from kbench.store.sync import Collection


def prepare_store(config: StoreConfig, collection: Collection, dataset: Dataset, chunks: list[Chunk],
                  embedded: EmbeddingResult, workspace: Path) -> StoreOutcome:
    """Put the run's vectors where ``store.backend`` keeps them; returns what searches them."""
    return STORE_BACKENDS.get(config.backend).impl(config, collection, dataset, chunks, embedded, workspace)


def needs_recall_check(config: StoreConfig, outcome: StoreOutcome) -> bool:
    return config.recall_sample_queries > 0 and not outcome.exact


def index_recall(outcome: StoreOutcome, queries: list, embed_queries, config: StoreConfig,
                 seed: int = 0) -> dict[str, float]:
    """recall@k of the store's index against exact search, on a seeded sample of the run's queries."""
    sample = list(queries)
    if len(sample) > config.recall_sample_queries:
        sample = random.Random(seed).sample(sample, config.recall_sample_queries)
    if not sample or outcome.ok_ids is None or len(outcome.ok_ids) == 0:
        return {}
    query_vectors = embed_queries([q.text for q in sample])
    recall = recall_at_k(outcome.vector_index, outcome.ok_vectors, outcome.ok_ids, query_vectors, config.recall_k)
    return {f"index_recall_at_{config.recall_k}": recall, "index_recall_queries": float(len(sample))}


def check_store(config: StoreConfig, workspace: Path) -> None:
    """Before any work: an existing DuckDB store file that is damaged or of another schema fails here, and so does a
    store.dsn where no PostgreSQL answers or pgvector cannot be had, or a FAISS that does not import."""
    if config.backend in ("faiss", "duckdb"):  # both search through a FAISS index (DuckDB mirrors the rows)
        faiss_module()
    if config.backend == "duckdb":
        check_store_file(config.duckdb_path(workspace))
    elif config.backend == "pgvector":
        check_server(config)
