"""Local sentence-transformers models, loaded by path from the offline catalogue."""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from kbench.embedding.config import EmbeddingConfig
from kbench.embedding.models import resolve_model_path
from kbench.embedding.registry import EMBEDDING_PROVIDERS


def model_revision(folder: Path) -> str:
    """A short fingerprint of a model folder: its config files and the sizes of its weight files."""
    h = hashlib.sha256()
    for name in ("config.json", "modules.json", "sentence_bert_config.json", "config_sentence_transformers.json"):
        p = folder / name
        if p.is_file():
            h.update(p.read_bytes())
    for p in sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.bin")):
        h.update(f"{p.name}:{p.stat().st_size}".encode())
    return h.hexdigest()[:12]


@EMBEDDING_PROVIDERS.register("sentence_transformers")
class SentenceTransformerEncoder:
    """A local sentence-transformers model from the offline catalogue (or a folder), on CPU."""

    def __init__(self, config: EmbeddingConfig):
        from sentence_transformers import SentenceTransformer

        self.config = config
        self.path = resolve_model_path(config.model)
        self.model_key = self.path.name
        self.revision = model_revision(self.path)
        self.model = SentenceTransformer(str(self.path), device="cpu", local_files_only=True)
        if config.max_seq_length:
            self.model.max_seq_length = config.max_seq_length
        get_dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        native = get_dim()
        if config.dimension and config.dimension > native:
            raise ValueError(
                f"embedding.dimension: {config.dimension} is larger than {config.model}'s {native} dimensions; "
                f"use a value <= {native} (truncation) or leave it unset"
            )
        self.dimension = config.dimension or native

    @property
    def tokenizer(self):
        return self.model.tokenizer

    def encode(self, texts: list[str], progress: bool = False) -> np.ndarray:
        vectors = self.model.encode(
            texts, batch_size=self.config.batch_size, convert_to_numpy=True,
            normalize_embeddings=False, show_progress_bar=progress,
        ).astype(np.float32)
        return vectors[:, : self.dimension]
