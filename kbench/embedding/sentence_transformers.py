"""Local sentence-transformers models on torch, ONNX Runtime or OpenVINO (``embedding.backend``).

torch runs the folder through ``SentenceTransformer``. The other backends run the same weights exported to
ONNX once per model version (``onnx_export.exported_model``, cached under the exports folder the encoder is
given: kbench/paths.py ``exports_dir``), or the ONNX file a package ships (paraphrase-MiniLM-L3-v2), through
``onnx_runtime.OnnxEncoder``.

``openvino-int8`` is the reranker's static int8 recipe (kbench/embedding/openvino_int8.py: NNCF, no SmoothQuant,
the FFN output projections of the first third of the layers left in floating point) calibrated on the run's own
corpus: ``calibrate(texts)`` picks ``CALIBRATION_TEXTS`` of the texts (the first by SHA-256 of the distinct texts,
so the sample does not depend on their order) and returns the key of that calibration; the model is built on the
first ``encode`` (once per key, kept beside the export). The embedding stage calibrates on the first texts it
embeds (the run's chunks) and keys the vector cache by the calibration, since the vectors depend on it.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path

import numpy as np

from kbench.embedding.config import EmbeddingConfig
from kbench.embedding.models import CATALOGUE, resolve_model_path
from kbench.embedding.onnx_export import exported_model
from kbench.embedding.onnx_runtime import OnnxEncoder, Pooling, length_sorted_batches, load_tokenizer
from kbench.embedding.openvino_int8 import INT8_RECIPE, calibrated_int8
from kbench.embedding.registry import EMBEDDING_PROVIDERS
from kbench.embedding.runtimes import check_runtimes
from kbench.errors import ConfigError
from kbench.hashing import file_sha256, sha256_text, stable_hash
from kbench.paths import exports_dir

CALIBRATION_TEXTS = 256  # of the corpus, for openvino-int8's activation ranges
CALIBRATION_BATCH = 16  # texts per calibration batch (NNCF takes each batch as one sample)


def model_revision(folder: Path) -> str:
    """A short fingerprint of a model folder: its config files and the bytes of its weight files.

    The weights' contents, not their sizes: a model retrained under the same name has weights of the same
    size, and its exports and cached vectors must not be taken for the old model's (about 0.1 s per 100 MB,
    once per process)."""
    h = hashlib.sha256()
    for name in ("config.json", "modules.json", "sentence_bert_config.json", "config_sentence_transformers.json"):
        p = folder / name
        if p.is_file():
            h.update(p.read_bytes())
    for p in sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.bin")) + sorted(folder.glob("*.onnx")):
        h.update(f"{p.name}:{file_sha256(p)}".encode())
    return h.hexdigest()[:12]


def torch_device(device: str) -> str:
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("embedding.device: cuda, but torch sees no GPU here; set embedding.device=cpu (or auto)")
    return "cuda" if device in ("auto", "cuda") and torch.cuda.is_available() else "cpu"


@contextlib.contextmanager
def torch_threads(n: int | None):
    """Run a block on ``n`` intra-op threads, then restore the process's setting."""
    if not n:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _max_seq_length(folder: Path, config: EmbeddingConfig, default: int | None) -> int:
    if config.max_seq_length:
        return config.max_seq_length
    bert_config = folder / "sentence_bert_config.json"
    if bert_config.is_file():
        value = json.loads(bert_config.read_text(encoding="utf-8")).get("max_seq_length")
        if value:
            return int(value)
    return default or 512


@EMBEDDING_PROVIDERS.register("sentence_transformers")
class SentenceTransformerEncoder:
    """A local sentence-transformers model from the offline catalogue (or a folder) on ``embedding.backend``."""

    def __init__(self, config: EmbeddingConfig, exports: Path | None = None):
        self.config = config
        self.exports = exports or exports_dir()
        self.needs_calibration = config.backend == "openvino-int8"
        self.calibration_key: str | None = None
        self._calibration: list[str] = []
        spec = CATALOGUE.get(config.model)
        if spec is not None and spec.provider != "sentence_transformers":
            raise ValueError(f"embedding.model: {config.model} is a {spec.provider} model; "
                             f"set embedding.provider={spec.provider}")
        if spec is not None and config.backend not in spec.backends:
            raise ValueError(f"embedding.backend: {config.model} runs on {', '.join(spec.backends)}, "
                             f"not {config.backend}; set embedding.backend={spec.backends[0]}")
        check_runtimes(config.backend)  # a missing or broken runtime: one line, before any export
        self.path = resolve_model_path(config.model)
        self.model_key = self.path.name
        self.revision = model_revision(self.path)
        self.model = None
        self.onnx: OnnxEncoder | None = None
        if config.backend == "torch":
            from sentence_transformers import SentenceTransformer

            self.model = SentenceTransformer(str(self.path), device=torch_device(config.device),
                                             local_files_only=True)
            if config.max_seq_length:
                self.model.max_seq_length = config.max_seq_length
            get_dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
            native = get_dim()
        elif self.needs_calibration:  # built once calibrated (calibrate), on the first encode
            self._parts = self._onnx_parts(spec)
            native = self._parts["native"]
        else:
            self.onnx, native = self._onnx_encoder(spec)
        if config.dimension and config.dimension > native:
            raise ConfigError(
                f"embedding.dimension: {config.dimension} is larger than {config.model}'s {native} dimensions; "
                f"use a value <= {native} (truncation) or leave it unset"
            )
        self.dimension = config.dimension or native

    def _onnx_parts(self, spec) -> dict:
        """The ONNX file (exported on first use), tokenizer, pooling, length and padding the runners need."""
        config = self.config
        if spec is not None and spec.name == "paraphrase-MiniLM-L3-v2":
            # the package ships the ONNX file only; its vocabulary is BERT uncased, as all-MiniLM-L6-v2's
            onnx_path = self.path / spec.marker
            tokenizer_folder = resolve_model_path("all-MiniLM-L6-v2")
            pooling, pad_id, native = Pooling("mean", normalize=False), 0, spec.dimension
        else:
            model_config = json.loads((self.path / "config.json").read_text(encoding="utf-8"))
            onnx_path = exported_model(self.path, self.model_key, self.revision, int8=config.backend == "onnx-int8",
                                       root=self.exports)
            tokenizer_folder = self.path
            pooling, pad_id = Pooling.of_folder(self.path), int(model_config.get("pad_token_id") or 0)
            native = int(model_config["hidden_size"])
        default_length = spec.max_tokens if spec is not None else None
        return {"onnx": onnx_path, "tokenizer": tokenizer_folder / "tokenizer.json", "pooling": pooling,
                "max_length": _max_seq_length(self.path, config, default_length), "pad_id": pad_id, "native": native}

    def _onnx_encoder(self, spec) -> tuple[OnnxEncoder, int]:
        parts, config = self._onnx_parts(spec), self.config
        encoder = OnnxEncoder(parts["onnx"], parts["tokenizer"], parts["pooling"], parts["max_length"],
                              parts["pad_id"], config.backend, config.device, config.threads, config.query_threads,
                              config.precision)
        return encoder, parts["native"]

    def calibrate(self, texts: list[str]) -> str:
        """openvino-int8: take the calibration sample from ``texts`` (see the module doc); its key, which the
        vectors depend on. Once per encoder: later calls return the first key."""
        if self.calibration_key is None:
            ranked = sorted({sha256_text(t): t for t in texts if t.strip()}.items())
            self._calibration = [t for _, t in ranked[:CALIBRATION_TEXTS]]
            if not self._calibration:
                raise ValueError("embedding.backend openvino-int8 calibrates on the corpus, which has no text")
            self.calibration_key = stable_hash({"texts": [h for h, _ in ranked[:CALIBRATION_TEXTS]],
                                                "max_length": self._parts["max_length"], "recipe": INT8_RECIPE,
                                                "batch": CALIBRATION_BATCH}, 12)
        return self.calibration_key

    def _calibrated_encoder(self) -> OnnxEncoder:
        if self.calibration_key is None:
            raise RuntimeError("embedding.backend openvino-int8 calibrates on the corpus: embed the corpus (or call "
                               "calibrate(texts)) before anything else")
        parts, config = self._parts, self.config
        tokenizer = load_tokenizer(parts["tokenizer"], parts["max_length"])
        feeds = [feed for _, feed in length_sorted_batches(tokenizer.encode_batch(self._calibration),
                                                           CALIBRATION_BATCH, parts["pad_id"])]
        onnx = Path(parts["onnx"])
        model = calibrated_int8(onnx, onnx.parent / f"{onnx.stem}-openvino-int8-{self.calibration_key}", feeds,
                                stage="embedding")
        return OnnxEncoder(model, parts["tokenizer"], parts["pooling"], parts["max_length"], parts["pad_id"],
                           "openvino-int8", config.device, config.threads, config.query_threads, config.precision)

    @property
    def tokenizer(self):
        return self.model.tokenizer if self.model is not None else None

    def encode(self, texts: list[str], progress: bool = False, for_queries: bool = False) -> np.ndarray:
        if self.needs_calibration and self.onnx is None:
            self.onnx = self._calibrated_encoder()
        if self.onnx is not None:
            vectors = self.onnx.encode(texts, self.config.batch_size, for_queries=for_queries)
        else:
            threads = self.config.query_threads if for_queries else self.config.threads
            with torch_threads(threads):
                vectors = self.model.encode(
                    texts, batch_size=self.config.batch_size, convert_to_numpy=True,
                    normalize_embeddings=False, show_progress_bar=progress,
                ).astype(np.float32)
        return vectors[:, : self.dimension]
