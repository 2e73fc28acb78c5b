"""The embedding section: which model encodes chunks and queries, through which provider and backend."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from kbench.embedding.registry import EMBEDDING_PROVIDERS
from kbench.registry import StrictModel

Backend = Literal["torch", "onnx", "onnx-int8", "openvino"]
Device = Literal["auto", "cpu", "cuda"]


class EmbeddingConfig(StrictModel):
    model: str = Field("all-MiniLM-L6-v2", description="catalogue name (kbench models list) or a local folder")
    provider: str = Field("sentence_transformers",
                          description="a registered provider: sentence_transformers, static, openai")
    backend: Backend = Field("torch", description="sentence_transformers runtime: torch, onnx (exported fp32), "
                                                  "onnx-int8 (dynamic int8), openvino (the fp32 export)")
    device: Device = Field("auto", description="auto: cuda when a GPU is visible, else cpu")
    batch_size: int = Field(64, ge=1, description="texts per encode call")
    threads: int | None = Field(None, ge=1, description="intra-op threads for batch encoding; default: the runtime's")
    query_threads: int | None = Field(1, ge=1, description="intra-op threads for encoding one query (latency); "
                                      "1: waking more threads costs more than they save on a short text")
    normalize: bool = Field(True, description="L2-normalize so inner product = cosine")
    dimension: int | None = Field(None, ge=1, description="keep the first N dims (Matryoshka), renormalized; "
                                                          "openai: the API's `dimensions`")
    max_seq_length: int | None = Field(None, ge=8, description="tokens; default: the model's own")
    query_prefix: str = ""
    document_prefix: str = ""
    base_url: str | None = Field(None, description="OpenAI-compatible endpoint, provider=openai")
    api_key_env: str = Field("OPENAI_API_KEY", description="name of the env var holding the key (never the key)")

    @field_validator("provider")
    @classmethod
    def _registered_provider(cls, name: str) -> str:
        return EMBEDDING_PROVIDERS.validate_name(name)
