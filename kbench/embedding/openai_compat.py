"""Any OpenAI-compatible embeddings endpoint (OpenAI, Azure, vLLM, Ollama, LM Studio, ``kbench serve`` ...).

Requests go through the one LLM client (kbench.llm): batched (``embedding.batch_size`` texts per request),
retried with backoff, ``Retry-After`` honoured, a quota stop at once. The key is read from the
environment variable named by ``embedding.api_key_env``; it is never stored in the config, logged or sent
to MLflow. Vectors are cached by the embedding stage's own cache (kbench.cache.EmbeddingCache), so the
client caches nothing here.

``encode_report`` returns successes and failures apart (Archon's EmbeddingBatchResult); the
embedding stage caches the successes and records each failed row, and a failed text never gets a vector.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from kbench.embedding.config import EmbeddingConfig
from kbench.embedding.registry import EMBEDDING_PROVIDERS
from kbench.llm import EmbeddingBatchResult, Endpoint, LLMClient, LLMError, LLMPolicy, UsageMeter


@EMBEDDING_PROVIDERS.register("openai")
class OpenAICompatibleEncoder:
    """An OpenAI-compatible embeddings endpoint (embedding.base_url, key from embedding.api_key_env)."""

    def __init__(self, config: EmbeddingConfig, exports: Path | None = None):  # exports: writes none
        endpoint = Endpoint("embedding", config.base_url, config.model, config.api_key_env, kind="embeddings")
        endpoint.check()
        self.usage = UsageMeter()
        # one request at a time, as this provider always sent them: a local server encodes one batch at a time
        # anyway, and queued requests would only run into the client's timeout
        self.client = LLMClient(endpoint, stage="embedding", meter=self.usage,
                                policy=LLMPolicy(batch_size=config.batch_size, concurrency=1))
        self.config = config
        self.model_key = config.model
        self.revision = "api"
        self.dimension = config.dimension  # None until the first response tells us
        self.tokenizer = None

    def encode_report(self, texts: list[str]) -> EmbeddingBatchResult:
        result = self.client.embed(texts, dimensions=self.config.dimension)
        if result.embeddings:
            self.dimension = int(result.embeddings[0].shape[0])
        return result

    def encode(self, texts: list[str], progress: bool = False, for_queries: bool = False) -> np.ndarray:
        """Every vector, or an LLMError naming the first failure (never a placeholder row)."""
        result = self.encode_report(texts)
        if result.failed_items:
            first = result.failed_items[0]
            raise LLMError(f"{result.failure_count} of {len(texts)} texts not embedded (first, text "
                           f"{first.index}: {first.error})")
        return np.stack(result.embeddings).astype(np.float32) if texts else np.zeros((0, self.dimension or 1),
                                                                                        dtype=np.float32)
