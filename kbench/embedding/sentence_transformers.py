"""Local sentence-transformers models on torch, ONNX Runtime or OpenVINO (``embedding.backend``).

torch runs the folder through ``SentenceTransformer``. The other backends run the same weights exported to
ONNX once per model version (``onnx_export.exported_model``, cached under models_dir()), or the ONNX file a
package ships (paraphrase-MiniLM-L3-v2), through ``onnx_runtime.OnnxEncoder``.
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
from kbench.embedding.onnx_runtime import OnnxEncoder, Pooling
from kbench.embedding.registry import EMBEDDING_PROVIDERS
from kbench.errors import ConfigError
from kbench.hashing import file_sha256


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

    def __init__(self, config: EmbeddingConfig):
        self.config = config
        spec = CATALOGUE.get(config.model)
        if spec is not None and spec.provider != "sentence_transformers":
            raise ValueError(f"embedding.model: {config.model} is a {spec.provider} model; "
                             f"set embedding.provider={spec.provider}")
        if spec is not None and config.backend not in spec.backends:
            raise ValueError(f"embedding.backend: {config.model} runs on {', '.join(spec.backends)}, "
                             f"not {config.backend}; set embedding.backend={spec.backends[0]}")
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
        else:
            self.onnx, native = self._onnx_encoder(spec)
        if config.dimension and config.dimension > native:
            raise ConfigError(
                f"embedding.dimension: {config.dimension} is larger than {config.model}'s {native} dimensions; "
                f"use a value <= {native} (truncation) or leave it unset"
            )
        self.dimension = config.dimension or native

    def _onnx_encoder(self, spec) -> tuple[OnnxEncoder, int]:
        config = self.config
        if spec is not None and spec.name == "paraphrase-MiniLM-L3-v2":
            # the package ships the ONNX file only; its vocabulary is BERT uncased, as all-MiniLM-L6-v2's
            onnx_path = self.path / spec.marker
            tokenizer_folder = resolve_model_path("all-MiniLM-L6-v2")
            pooling, pad_id, native = Pooling("mean", normalize=False), 0, spec.dimension
        else:
            model_config = json.loads((self.path / "config.json").read_text(encoding="utf-8"))
            onnx_path = exported_model(self.path, self.model_key, self.revision, int8=config.backend == "onnx-int8")
            tokenizer_folder = self.path
            pooling, pad_id = Pooling.of_folder(self.path), int(model_config.get("pad_token_id") or 0)
            native = int(model_config["hidden_size"])
        default_length = spec.max_tokens if spec is not None else None
        encoder = OnnxEncoder(onnx_path, tokenizer_folder / "tokenizer.json", pooling,
                              _max_seq_length(self.path, config, default_length), pad_id, config.backend,
                              config.device, config.threads, config.query_threads, config.precision)
        return encoder, native

    @property
    def tokenizer(self):
        return self.model.tokenizer if self.model is not None else None

    def encode(self, texts: list[str], progress: bool = False, for_queries: bool = False) -> np.ndarray:
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
