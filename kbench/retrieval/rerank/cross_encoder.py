"""``cross_encoder``: score (query, chunk) pairs with a sentence-transformers CrossEncoder (the Archon replication guide).

Production fetches ``match_count * 5`` candidates, scores every pair with
``cross-encoder/ms-marco-MiniLM-L-6-v2`` and keeps the best ``match_count``. Here the model is found
locally, never downloaded:
- a folder path;
- the name of a model kbench trained (``kbench models train-reranker --out NAME``, under models_dir());
- a hub id (``org/name``) only if it already sits in the local Hugging Face cache (downloaded on a
  machine with network); otherwise the run stops before any work with a message naming the trainer.
A plain embedding model (all-MiniLM-L6-v2) is refused: loaded as a cross-encoder its head is random.

``backend: onnx | onnx-int8 | openvino`` scores the pairs with the model exported to ONNX once (cached in the
run's exports folder, kbench/paths.py exports_dir, as the bi-encoders' are), in length-sorted batches, with the
folder's own activation.
OpenVINO computes in bf16 where the CPU can (``precision: auto``; ``f32`` for torch's scores to 1e-5).
``openvino-int8`` is that export quantized to static int8 (embedding/openvino_int8.py), calibrated on pairs
drawn from the run's own corpus (a seeded sample: a chunk's opening words as the query, 25 chunks as its
candidates), cached per model and calibration sample.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from kbench.embedding.models import CATALOGUE, ModelNotInstalledError, resolve_model_path
from kbench.embedding.onnx_export import exported_model
from kbench.embedding.onnx_runtime import OnnxPairScorer, Precision, length_sorted_batches, load_tokenizer
from kbench.embedding.openvino_int8 import INT8_RECIPE, calibrated_int8
from kbench.embedding.sentence_transformers import model_revision, torch_threads
from kbench.hashing import stable_hash
from kbench.paths import exports_dir, models_dir
from kbench.records import Hit
from kbench.registry import in_unit
from kbench.retrieval.contracts import Reranker, SearchContext
from kbench.retrieval.registry import RERANKERS
from kbench.retrieval.rerank.common import CandidateParams, apply_scores, split_candidates

TRAIN_HINT = ("train one offline with `kbench models train-reranker --dataset scifact --split train "
              "--out scifact-minilm-ce` and set rerank.model=scifact-minilm-ce")


class CrossEncoderParams(CandidateParams):
    model: str = Field("cross-encoder/ms-marco-MiniLM-L-6-v2",
                       description="folder, name of a kbench-trained model, or a hub id already in the local HF cache")
    batch_size: int = Field(32, ge=1, description="pairs per forward pass", json_schema_extra=in_unit("pairs"))
    max_length: int | None = Field(None, ge=8, description="tokens per (query, chunk) pair; default: the model's own",
                                   json_schema_extra=in_unit("tokens"))
    backend: Literal["torch", "onnx", "onnx-int8", "openvino", "openvino-int8"] = Field(
        "torch", description="torch, or the model exported to ONNX: onnx (fp32), onnx-int8 (dynamic), openvino, "
                             "openvino-int8 (static int8, calibrated on the corpus)")
    calibration_queries: int = Field(12, ge=1, description="openvino-int8: calibration batches (one pseudo-query "
                                                          "and its candidates each)",
                                                          json_schema_extra=in_unit("queries"))
    threads: int | None = Field(None, ge=1, description="intra-op threads; default: the runtime's",
                                json_schema_extra=in_unit("threads"))
    precision: Precision = Field("auto", description="openvino, openvino-int8: the float precision of what is not "
                                                     "int8; auto: OpenVINO's choice (bf16 on a CPU with bf16 "
                                                     "instructions, else f32); f32: scores that match torch's")

    @model_validator(mode="after")
    def _precision_is_openvino_s(self) -> CrossEncoderParams:
        if self.precision != "auto" and not self.backend.startswith("openvino"):
            raise ValueError(f"rerank.precision: {self.precision} applies to rerank.backend=openvino or "
                             f"openvino-int8 only (torch and onnx compute in f32); remove rerank.precision")
        return self


def _cached_hub_snapshot(repo_id: str) -> Path | None:
    """The local Hugging Face cache copy of ``repo_id``, without touching the network."""
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError:
        return None
    try:
        return Path(snapshot_download(repo_id, local_files_only=True))
    except (LocalEntryNotFoundError, ValueError, OSError):
        return None


def resolve_cross_encoder(name: str) -> Path:
    """A reranker model name -> a local folder holding a trained sequence-classification head."""
    folder = None
    as_path = Path(name).expanduser()
    if as_path.is_dir():
        folder = as_path.resolve()
    elif (models_dir() / name).is_dir():
        folder = models_dir() / name
    elif name in CATALOGUE:  # an embedding model: found, then refused below for its missing head
        folder = resolve_model_path(name)
    elif "/" in name and not as_path.is_absolute():
        folder = _cached_hub_snapshot(name)
        if folder is None:
            raise ModelNotInstalledError(
                f"rerank.model: {name!r} is a hub id and is not in the local Hugging Face cache; kbench never "
                f"downloads at run time. Either {TRAIN_HINT}, or download the model on a machine with network "
                f"(`hf download {name}`) and point rerank.model at the folder."
            )
    if folder is None:
        raise ModelNotInstalledError(
            f"rerank.model: {name!r} is not a folder, nor a model under {models_dir()}, nor a hub id; {TRAIN_HINT}"
        )
    config_file = folder / "config.json"
    architectures = []
    if config_file.is_file():
        architectures = json.loads(config_file.read_text(encoding="utf-8")).get("architectures") or []
    if not any(a.endswith("ForSequenceClassification") for a in architectures):
        raise ModelNotInstalledError(
            f"rerank.model: {folder} is not a cross-encoder (architectures {architectures or 'unknown'}); loaded as "
            f"one its scoring head would be random and its scores meaningless. To get one, {TRAIN_HINT}"
        )
    return folder


def _read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def calibration_pairs(texts: list[str], queries: int, candidates: int = 25, seed: int = 0,
                      query_words: int = 12) -> list[list[tuple[str, str]]]:
    """Pseudo-queries and their candidates from the corpus itself, for static int8 calibration: per query, a
    seeded chunk's opening words paired with that chunk and ``candidates - 1`` others (rerank's input shape)."""
    texts = [t for t in texts if t.strip()]
    if not texts:
        return []
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(queries):
        picks = rng.choice(len(texts), size=min(candidates, len(texts)), replace=False)
        query = " ".join(texts[picks[0]].split()[:query_words])
        batches.append([(query, texts[i]) for i in picks])
    return batches


def onnx_pair_scorer(folder: Path, params: CrossEncoderParams,
                     calibration: list[list[tuple[str, str]]] | None = None,
                     exports: Path | None = None) -> OnnxPairScorer:
    """The cross-encoder in ``folder`` on ONNX, scoring as sentence-transformers' CrossEncoder.predict does:
    the same truncation (longest first, the model's max length) and activation (Sigmoid for one label
    unless the folder names another)."""
    config = _read_json(folder / "config.json")
    activation_name = _read_json(folder / "config_sentence_transformers.json").get("activation_fn")
    if activation_name is None:
        activation = "sigmoid" if len(config.get("id2label") or {"0": 0}) == 1 else None
    elif activation_name.endswith("Sigmoid"):
        activation = "sigmoid"
    elif activation_name.endswith("Identity"):
        activation = None
    else:
        raise ValueError(f"rerank.backend: {folder}'s activation {activation_name} runs on torch only; "
                         "set rerank.backend=torch")
    max_length = params.max_length or int(_read_json(folder / "tokenizer_config.json").get("model_max_length")
                                           or 512)
    max_length = min(max_length, int(config.get("max_position_embeddings") or max_length))
    revision = model_revision(folder)
    onnx_path = exported_model(folder, folder.name, revision, int8=params.backend == "onnx-int8",
                               head="sequence_classification", root=exports)
    pad_id = int(config.get("pad_token_id") or 0)
    backend = params.backend
    if backend == "openvino-int8":
        tokenizer = load_tokenizer(folder / "tokenizer.json", max_length)
        feeds = [feed for pairs in calibration or [] for _, feed in
                 length_sorted_batches(tokenizer.encode_batch(pairs), params.batch_size, pad_id)]
        key = stable_hash({"pairs": calibration, "max_length": max_length, "batch_size": params.batch_size,
                           "recipe": INT8_RECIPE}, 12)
        onnx_path = calibrated_int8(onnx_path, onnx_path.parent / f"{onnx_path.stem}-openvino-int8-{key}", feeds)
        backend = "openvino"
    return OnnxPairScorer(onnx_path, folder / "tokenizer.json", max_length, pad_id, backend, activation,
                          threads=params.threads, precision=params.precision)


@RERANKERS.register("cross_encoder", CrossEncoderParams)
class CrossEncoderReranker(Reranker):
    """Rescore the top candidates with a cross-encoder (the Archon replication guide; 5x candidates)."""

    @staticmethod
    def preflight(params: CrossEncoderParams) -> None:
        resolve_cross_encoder(params.model)

    def __init__(self, context: SearchContext, params: CrossEncoderParams):
        self.context, self.params = context, params
        self.path = resolve_cross_encoder(params.model)
        self.model, self.onnx = None, None
        if params.backend == "torch":
            from sentence_transformers import CrossEncoder

            kwargs = {"max_length": params.max_length} if params.max_length else {}
            self.model = CrossEncoder(str(self.path), device="cpu", local_files_only=True, **kwargs)
        else:
            calibration = None
            if params.backend == "openvino-int8":
                calibration = calibration_pairs([c.text for c in context.chunks], params.calibration_queries)
            self.onnx = onnx_pair_scorer(self.path, params, calibration, exports_dir(context.workspace / "cache"))

    def score(self, query_text: str, texts: list[str]) -> list[float]:
        if not texts:
            return []
        if self.onnx is not None:
            scores = self.onnx.score([(query_text, t) for t in texts], self.params.batch_size)
        else:
            with torch_threads(self.params.threads):
                scores = self.model.predict([[query_text, t] for t in texts], batch_size=self.params.batch_size,
                                            show_progress_bar=False, convert_to_numpy=True)
        return [float(s) for s in np.asarray(scores)]

    def rerank(self, query_text: str, hits: list[Hit], top_k: int) -> list[Hit]:
        candidates, tail = split_candidates(hits, self.params.max_candidates)
        scores = self.score(query_text, [self.context.chunks[h.chunk_index].text for h in candidates])
        return apply_scores(candidates, scores, top_k, tail)
