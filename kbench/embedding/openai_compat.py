"""Any OpenAI-compatible embeddings endpoint (OpenAI, Azure, vLLM, Ollama, LM Studio ...).

The key is read from the environment variable named by ``embedding.api_key_env``; it is never stored
in the config, logged or sent to MLflow.
"""
from __future__ import annotations

import os

import numpy as np

from kbench.embedding.config import EmbeddingConfig
from kbench.embedding.registry import EMBEDDING_PROVIDERS


@EMBEDDING_PROVIDERS.register("openai")
class OpenAICompatibleEncoder:
    """An OpenAI-compatible embeddings endpoint (embedding.base_url, key from embedding.api_key_env)."""

    def __init__(self, config: EmbeddingConfig):
        if not config.base_url and not os.environ.get("OPENAI_BASE_URL"):
            raise ValueError(
                "embedding.base_url: provider 'openai' needs an endpoint; set embedding.base_url "
                "(e.g. http://127.0.0.1:8000/v1) or OPENAI_BASE_URL"
            )
        key = os.environ.get(config.api_key_env)
        if not key:
            raise ValueError(
                f"embedding.api_key_env: environment variable {config.api_key_env} is not set; "
                "export it with your API key (kbench never reads keys from config files)"
            )
        from openai import OpenAI

        self.client = OpenAI(base_url=config.base_url, api_key=key, max_retries=2, timeout=60)
        self.config = config
        self.model_key = config.model
        self.revision = "api"
        self.dimension = config.dimension  # None until the first response tells us
        self.tokenizer = None

    def encode(self, texts: list[str], progress: bool = False) -> np.ndarray:
        out = []
        for i in range(0, len(texts), self.config.batch_size):
            batch = texts[i : i + self.config.batch_size]
            kwargs = {"dimensions": self.config.dimension} if self.config.dimension else {}
            response = self.client.embeddings.create(model=self.config.model, input=batch, **kwargs)
            out.extend(item.embedding for item in response.data)
        vectors = np.asarray(out, dtype=np.float32)
        self.dimension = vectors.shape[1]
        return vectors
