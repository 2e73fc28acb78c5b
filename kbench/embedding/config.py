"""The embedding section: which model encodes chunks and queries, through which provider."""
from __future__ import annotations

from pydantic import Field, field_validator

from kbench.embedding.registry import EMBEDDING_PROVIDERS
from kbench.registry import StrictModel


class EmbeddingConfig(StrictModel):
    model: str = Field("all-MiniLM-L6-v2", description="catalogue name (kbench models list) or a local folder")
    provider: str = Field("sentence_transformers", description="a registered provider: sentence_transformers, openai")
    batch_size: int = Field(64, ge=1, description="texts per encode call")
    normalize: bool = Field(True, description="L2-normalize so inner product = cosine")
    dimension: int | None = Field(None, ge=1, description="truncate vectors to this many dims (Matryoshka)")
    max_seq_length: int | None = Field(None, ge=8, description="tokens; default: the model's own")
    query_prefix: str = ""
    document_prefix: str = ""
    base_url: str | None = Field(None, description="OpenAI-compatible endpoint, provider=openai")
    api_key_env: str = Field("OPENAI_API_KEY", description="name of the env var holding the key (never the key)")

    @field_validator("provider")
    @classmethod
    def _registered_provider(cls, name: str) -> str:
        return EMBEDDING_PROVIDERS.validate_name(name)
