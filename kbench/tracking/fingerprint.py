"""A run's fingerprint: what its numbers depend on beyond the config's knobs.

``fingerprint.json`` in every run folder (and so in MLflow's artifacts) records the dataset's content hash
(documents, questions, judgements), the chunker's source, the embedding model's id and revision, the index
parameters and the kbench version. ``kbench gate`` reads it to refuse comparing runs made on different
data; two runs with equal fingerprints and equal configs computed from the same inputs.
"""
from __future__ import annotations

import hashlib
import inspect
from importlib import metadata
from typing import Any

from kbench.chunking.registry import CHUNKERS
from kbench.embedding.models import ModelNotInstalledError, resolve_model_path
from kbench.embedding.sentence_transformers import model_revision
from kbench.hashing import stable_hash

FINGERPRINT_FILE = "fingerprint.json"
INDEX_KNOBS = ("backend", "index", "hnsw_m", "hnsw_ef_search", "hnsw_ef_construction", "ivf_nlist", "ivf_nprobe")


def kbench_version() -> str:
    try:
        return metadata.version("kbench")
    except metadata.PackageNotFoundError:
        return "unknown"


def source_hash(obj: Any) -> str:
    """SHA-256 (16 hex) of the source file that defines ``obj``: an edit to a chunker changes it."""
    try:
        path = inspect.getsourcefile(obj)
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()[:16]
    except (OSError, TypeError):
        return "unavailable"


def model_fingerprint(embedding) -> dict[str, str | None]:
    """The model's id and revision without loading it: a local model's revision hashes its folder's config
    files and weight sizes (as the embedding cache does); an API model's revision is the endpoint."""
    revision: str | None
    if embedding.provider == "sentence_transformers":
        try:
            revision = model_revision(resolve_model_path(embedding.model))
        except ModelNotInstalledError:
            revision = "not installed"
    else:
        revision = f"api:{embedding.base_url or 'default'}"
    return {"id": embedding.model, "provider": embedding.provider, "revision": revision,
            "dimension": embedding.dimension}


def run_fingerprint(experiment, dataset_hash: str | None = None) -> dict[str, Any]:
    """The fingerprint of ``experiment`` (an ``Experiment``; untyped because config sits above tracking).

    ``dataset_hash`` overrides the dataset folder's hash (a live store hashes the rows it read)."""
    strategy = experiment.chunking.strategy
    store = experiment.store.model_dump(mode="json")
    data = {
        "dataset_hash": dataset_hash or experiment.dataset_content_hash(),
        "chunker": {"strategy": strategy, "source_hash": source_hash(CHUNKERS.get(strategy).impl)},
        "model": model_fingerprint(experiment.embedding),
        "index": {k: store[k] for k in INDEX_KNOBS},
        "kbench_version": kbench_version(),
    }
    data["hash"] = stable_hash(data)
    return data
