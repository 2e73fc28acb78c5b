"""The enrichment section: contextual embeddings through an OpenAI-compatible chat endpoint."""
from __future__ import annotations

from pydantic import Field

from kbench.registry import StrictModel


class EnrichmentConfig(StrictModel):
    """Contextual embeddings (reference 000/002): an LLM situates each chunk in its document."""

    enabled: bool = False
    base_url: str | None = None
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    document_chars: int = Field(5000, ge=1, description="leading characters of the document shown to the LLM")
    max_tokens: int = 200
    concurrency: int = Field(4, ge=1, description="LLM requests in flight at once")

