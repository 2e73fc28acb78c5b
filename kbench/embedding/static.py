"""Static embedders: a vector per token, averaged; thousands of passages per second on one core.

- ``wordllama-l2-supercat`` (256-d): ``WordLlama.load(cache_dir=<the package folder>, disable_download=True)``;
  its plain ``load()`` looks in a user cache and tries a download.
- ``tokenlearn-static-64`` (64-d): the model2vec-format folder in ``tokenlearn-static-model``, run by
  ``model2vec.StaticModel``.
A static model has no backend or device: ``embedding.backend`` must stay ``torch`` (the default).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from kbench.embedding.config import EmbeddingConfig
from kbench.embedding.models import CATALOGUE, ModelNotInstalledError, resolve_model_path
from kbench.embedding.registry import EMBEDDING_PROVIDERS
from kbench.embedding.sentence_transformers import model_revision
from kbench.errors import ConfigError


@EMBEDDING_PROVIDERS.register("static")
class StaticEncoder:
    """wordllama or a model2vec folder from the offline catalogue."""

    def __init__(self, config: EmbeddingConfig, exports: Path | None = None):  # exports: writes none
        spec = CATALOGUE.get(config.model)
        if spec is None or spec.provider != "static":
            static = ", ".join(n for n, s in CATALOGUE.items() if s.provider == "static")
            raise ValueError(f"embedding.model: provider 'static' runs {static}, not {config.model!r}")
        if config.backend != "torch":
            raise ValueError(f"embedding.backend: {config.model} is a static model with no backend to choose; "
                             "remove embedding.backend (or set it to torch)")
        self.config = config
        self.path = resolve_model_path(config.model)
        self.model_key = spec.name
        self.revision = model_revision(self.path)
        self.tokenizer = None
        if spec.name.startswith("wordllama"):
            import wordllama

            self._wordllama = wordllama.WordLlama.load(cache_dir=self.path.parent, disable_download=True,
                                                       dim=spec.dimension)
            self._encode = lambda texts: self._wordllama.embed(texts, norm=False, batch_size=config.batch_size)
        else:
            try:
                from model2vec import StaticModel
            except ImportError as e:
                raise ModelNotInstalledError(f"{spec.name} runs on model2vec. Install with: {spec.install}") from e
            self._model2vec = StaticModel.from_pretrained(str(self.path))
            self._encode = lambda texts: self._model2vec.encode(texts, batch_size=max(config.batch_size, 1024),
                                                                 use_multiprocessing=False)
        if config.dimension and config.dimension > spec.dimension:
            raise ConfigError(f"embedding.dimension: {config.dimension} is larger than {spec.name}'s "
                             f"{spec.dimension} dimensions; use a value <= {spec.dimension} or leave it unset")
        self.dimension = config.dimension or spec.dimension

    def encode(self, texts: list[str], progress: bool = False, for_queries: bool = False) -> np.ndarray:
        vectors = np.asarray(self._encode(list(texts)), dtype=np.float32)
        return vectors[:, : self.dimension]
