"""The code-example collection in the workspace's DuckDB (``store.backend: duckdb``): production's
archon_code_examples beside archon_crawled_pages (schema.sql).

A run with the code-example index writes its blocks there, one row per block with a vector (code, summary,
language, source page, the block's offsets in the page, the vector of code + summary). The collection's name
hashes the dataset, the code-example knobs that change a row (threshold, summary mode, model, prompt knobs) and
the embedding namespace, so two runs with equal rows share it; a run replaces the collection's rows in one
transaction. The ``code_examples`` leg searches the same vectors in memory (FAISS), as every leg on units of its
own does.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from kbench.datasets.config import DatasetConfig
from kbench.embedding.stage import EmbeddingResult
from kbench.enrichment.config import CodeExamplesConfig
from kbench.hashing import sha256_text, stable_hash
from kbench.records import Chunk, Document
from kbench.store.config import StoreConfig
from kbench.store.duckdb_store import DuckStore
from kbench.store.sync import dataset_identity

NOT_ROW_KNOBS = {"enabled", "base_url", "api_key_env", "concurrency"}  # where and how fast, not what is written


def code_examples_collection(dataset: DatasetConfig, code_examples: CodeExamplesConfig,
                             embedding_namespace: str) -> str:
    dataset_name, dataset_id = dataset_identity(dataset)
    key = {"dataset": dataset_id,
           "code_examples": code_examples.model_dump(mode="json", exclude=NOT_ROW_KNOBS),
           "embedding": embedding_namespace}
    return f"{dataset_name}-code_examples-{stable_hash(key, 12)}".replace("/", "_").replace(" ", "_")


def code_example_rows(units: list[Chunk], documents: list[Document]) -> list[dict]:
    by_id = {d.doc_id: d for d in documents}
    rows = []
    for unit in units:
        doc = by_id[unit.doc_id]
        extra = {k: v for k, v in unit.metadata.items() if k not in ("summary", "language")}
        rows.append({"url": doc.url or doc.doc_id, "chunk_number": unit.chunk_number, "content": unit.text,
                     "summary": unit.metadata.get("summary"), "language": unit.metadata.get("language"),
                     "metadata": json.dumps(extra, sort_keys=True), "source_id": doc.source_id or None,
                     "page_id": unit.doc_id, "code_start": unit.start, "code_end": unit.end,
                     "content_hash": sha256_text(unit.text)})
    return rows


def store_code_examples(store_config: StoreConfig, dataset: DatasetConfig, config: CodeExamplesConfig,
                        embedding_model: str, documents: list[Document], units: list[Chunk],
                        embedded: EmbeddingResult, embedding_namespace: str, workspace: Path) -> dict[str, int]:
    """Write the blocks that have a vector to archon_code_examples; counts for the run."""
    ok = np.flatnonzero(embedded.ok_mask)
    name = code_examples_collection(dataset, config, embedding_namespace)
    with DuckStore.open(store_config.duckdb_path(workspace)) as store:
        written = store.write_code_examples(name, code_example_rows([units[i] for i in ok], documents),
                                            embedded.vectors[ok], embedding_model,
                                            config.model if config.summary == "llm" else None)
    return {"code_examples_stored": written}
