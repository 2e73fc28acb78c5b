"""A run's fingerprint: what its numbers depend on beyond the config's knobs.

``fingerprint.json`` in every run folder (and so in MLflow's artifacts) records the dataset's content hash
(documents, questions, judgements), the chunker's source, the embedding model's id and revision, the index
parameters and the kbench version, and what the embedding backend computes in on this machine
(``model.computes_in``: f32 for torch, onnx and static models; int8/f32 for onnx-int8; OpenVINO's float precision,
behind int8/ for openvino-int8: ``precision: auto`` is bf16 on a CPU with bf16 instructions and f32 elsewhere, and
the scores differ in the third decimal; absent for an API). ``kbench gate`` reads it to refuse comparing runs made
on different data; two runs with equal fingerprints and equal configs computed from the same inputs.

A cross-encoder reranker's ``rerank.computes_in`` is stated the same way. The hash leaves out a ``computes_in``
of f32 on torch and onnx (what they computed in before fingerprints said it), so torch, onnx and static runs keep
the hashes they had; onnx-int8 runs get a new one (their int8 is now stated).
"""
from __future__ import annotations

import hashlib
import inspect
from importlib import metadata
from typing import Any

from kbench.chunking.registry import CHUNKERS
from kbench.embedding.choice import backend_record
from kbench.embedding.models import ModelNotInstalledError, resolve_model_path
from kbench.embedding.onnx_runtime import computes_in, openvino_computes_in
from kbench.embedding.sentence_transformers import model_revision
from kbench.embedding.stage import embedding_computes_in
from kbench.hashing import stable_hash
from kbench.tracking import tags as tag

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
    found = {"id": embedding.model, "provider": embedding.provider, "revision": revision,
             "dimension": embedding.dimension}
    runs_in = embedding_computes_in(embedding)
    if runs_in is not None:
        found["computes_in"] = runs_in
    found.update(backend_record(embedding))  # the backend that ran and why: this machine's figures (not hashed)
    return found


def rerank_fingerprint(rerank) -> dict[str, str] | None:
    """What a cross-encoder computes in here: f32 (torch, onnx), int8/f32 (onnx-int8), OpenVINO's float
    precision (int8 models: of what is not int8). None without a cross-encoder."""
    if not rerank.enabled or rerank.strategy != "cross_encoder":
        return None
    params = rerank.params
    floats = openvino_computes_in(params.precision) if params.backend.startswith("openvino") else "f32"
    return {"computes_in": computes_in(params.backend, floats)}


# What a backend computed in before fingerprints said it (f32 on torch and onnx): left out of the hash, so runs
# on them keep the hashes they had; every other value (OpenVINO's precision, int8) is hashed.
IMPLICIT_F32 = ("torch", "onnx", "exact")  # exact: whichever backend ran, torch's vectors to f32 rounding
# Which backend ran here and why (this machine's figures): not hashed, since exact gives the same results on any
# machine and any other backend is in the config already
UNHASHED = ("backend_ran", "backend_why")


def hashed_view(data: dict[str, Any], embedding_backend: str, rerank_backend: str | None) -> dict[str, Any]:
    """``data`` as its hash is computed: an implicit f32 left out (IMPLICIT_F32), an emptied section dropped."""
    view = dict(data)
    if "model" in view:
        view["model"] = {k: v for k, v in view["model"].items() if k not in UNHASHED}
    for key, backend in (("model", embedding_backend), ("rerank", rerank_backend)):
        section = view.get(key)
        if section and section.get("computes_in") == "f32" and backend in IMPLICIT_F32:
            section = {k: v for k, v in section.items() if k != "computes_in"}
            if section:
                view[key] = section
            else:
                del view[key]
    return view


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
    rerank = rerank_fingerprint(experiment.rerank)
    if rerank is not None:
        data["rerank"] = rerank
    # static models and APIs have backend torch in their config (the only value they accept)
    rerank_backend = experiment.rerank.params.backend if rerank is not None else None
    data["hash"] = stable_hash(hashed_view(data, experiment.embedding.backend, rerank_backend))
    return data


def fingerprint_tags(fingerprint: dict[str, Any]) -> dict[str, str]:
    """The MLflow tags a run's fingerprint gives: its hash, the dataset's hash and, with OpenVINO, the
    precision computed in (``kbench.computes_in``: "embedding bf16, rerank int8/bf16")."""
    tags = {tag.FINGERPRINT: fingerprint["hash"], tag.DATASET_HASH: fingerprint["dataset_hash"]}
    computes_in = [f"{stage} {fingerprint[key]['computes_in']}" for stage, key in (("embedding", "model"),
                   ("rerank", "rerank")) if "computes_in" in (fingerprint.get(key) or {})]
    if computes_in:
        tags[tag.COMPUTES_IN] = ", ".join(computes_in)
    return tags
