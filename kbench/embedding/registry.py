"""Embedding providers by config name (``embedding.provider``).

A provider is a class built from the embedding section, ``Encoder(config, exports=None)``, that turns texts into
vectors; ``exports`` is the folder where it may write models it derives (ONNX exports), the run's
(kbench/paths.py ``exports_dir``). A backend that calibrates on the corpus (openvino-int8) also has
``needs_calibration`` and ``calibrate(texts) -> key``, which the embedding stage calls with the first texts it embeds.
Its module registers it here and ``EMBEDDING_PROVIDERS`` below names that module, imported when the provider is
first used, so adding one is a new module and its line there. Model libraries (sentence_transformers, openai) are
imported when an encoder is built, never when a provider registers.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from kbench.registry import Registry

if TYPE_CHECKING:  # annotations only: the config layer names this registry
    import numpy as np

    from kbench.llm import EmbeddingBatchResult, UsageMeter


class Encoder(Protocol):
    model_key: str  # names the model in the embedding cache's namespace (kbench.embedding.stage.CachedEmbedder)
    revision: str  # changes when the model's weights or config do, so the cache never serves stale vectors
    dimension: int | None  # None until the first vectors tell (an API that decides it)

    def __init__(self, config: Any, exports: Path | None = None) -> None: ...

    def encode(self, texts: list[str], progress: bool = False, for_queries: bool = False) -> np.ndarray:
        """(len(texts), dimension) float32, not normalized; ``for_queries``: one query, latency first."""


@runtime_checkable
class ReportingEncoder(Protocol):
    """An encoder behind an API (provider ``openai``): per-text failures and usage counts.

    ``encode_report`` returns successes and failures apart (kbench.llm.EmbeddingBatchResult); the
    embedding stage caches the successes, records each failed row and stops when the batch says the run
    must (quota). ``usage`` counts its requests and tokens for the run's MLflow metrics."""

    usage: UsageMeter

    def encode_report(self, texts: list[str]) -> EmbeddingBatchResult: ...


EMBEDDING_PROVIDERS: Registry[type[Encoder]] = Registry("embedding.provider", {
    "openai": "kbench.embedding.openai_compat",
    "sentence_transformers": "kbench.embedding.sentence_transformers",
    "static": "kbench.embedding.static",
})
