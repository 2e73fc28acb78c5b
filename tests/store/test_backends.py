"""Store backends come from a registry: the config names one, an unknown name fails with the allowed ones,
and each backend's outcome says whether its index is exact and what handle the legs get."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from kbench.config import ConfigError, StoreConfig, load_experiment
from kbench.datasets import load_dataset
from kbench.embedding.stage import EmbeddingResult
from kbench.store.registry import STORE_BACKENDS
from kbench.store.stage import needs_recall_check, prepare_store
from kbench.store.sync import make_collection


def test_the_registry_holds_the_four_backends():
    assert STORE_BACKENDS.names() == ["duckdb", "faiss", "live", "pgvector"]
    for name in STORE_BACKENDS.names():
        assert StoreConfig(backend=name).backend == name


def test_an_unknown_backend_is_a_config_error_naming_the_allowed_ones():
    with pytest.raises(ConfigError) as info:
        load_experiment({"dataset": {"name": "demo"}, "store": {"backend": "milvus"}})
    assert "store.backend: unknown value 'milvus'; allowed: duckdb, faiss, live, pgvector" in str(info.value)
    with pytest.raises(ValidationError, match="allowed: duckdb, faiss, live, pgvector"):
        StoreConfig(backend="milvus")


def test_duckdb_path_is_the_configured_file_or_the_workspace_store(tmp_path):
    assert StoreConfig().duckdb_path(tmp_path) == tmp_path / "stores" / "kbench.duckdb"
    assert StoreConfig(path="~/elsewhere.duckdb").duckdb_path(tmp_path) == Path.home() / "elsewhere.duckdb"


@pytest.mark.parametrize("index, exact", [("flat", True), ("hnsw", False)])
def test_faiss_backend_indexes_the_embedded_rows_in_memory(tmp_path, index, exact):
    experiment = load_experiment({"dataset": {"name": "demo"}, "store": {"backend": "faiss", "index": index}})
    dataset = load_dataset(experiment.dataset)
    vectors = np.random.default_rng(0).normal(size=(6, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    embedded = EmbeddingResult(vectors, failed={2: "timeout"})

    collection = make_collection(experiment.dataset, experiment.chunking, experiment.enrichment, "m", "ns", 16)
    outcome = prepare_store(experiment.store, collection, dataset, [], embedded, tmp_path)
    assert outcome.ok_ids.tolist() == [0, 1, 3, 4, 5]  # the failed row is not indexed
    assert outcome.handle is None  # nothing outlives the run
    assert outcome.exact is exact and needs_recall_check(experiment.store, outcome) is not exact
    scores, ids = outcome.vector_index.search(vectors[[3]], 1)
    assert ids[0, 0] == 3 and scores[0, 0] == pytest.approx(1.0, abs=1e-5)
    assert not list(tmp_path.iterdir())
