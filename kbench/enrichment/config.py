"""The enrichment section: contextual embeddings and the code-example index, through an OpenAI-compatible chat
endpoint."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from kbench.registry import StrictModel, in_unit

CODE_EXAMPLE_UNIT = "code_example"  # Chunk.unit of a code example: ids read "<doc>#code_example:<n>"


class CodeExamplesConfig(StrictModel):
    """Archon's code-example index ("agentic RAG"): fenced code blocks of the pages,
    each with an LLM summary, in a second collection the ``code_examples`` leg searches."""

    enabled: bool = Field(False, description="build the index (a leg must search it: code_examples)")
    min_code_chars: int = Field(250, ge=0, description="keep a block whose code is longer than this many "
                                                        "characters (production: > 250)")
    summary: Literal["llm", "none"] = Field(
        "llm", description="llm: an LLM summary of each block, embedded with its code (production); none: the code "
                           "alone (no endpoint needed)")
    base_url: str | None = Field(None, description="OpenAI-compatible chat endpoint; default OPENAI_BASE_URL")
    model: str | None = Field(None, description="chat model name at that endpoint")
    api_key_env: str = Field("OPENAI_API_KEY", description="name of the env var holding the key (never the key)")
    prompt_code_chars: int = Field(1500, ge=1, description="leading characters of the code shown to the LLM")
    context_chars: int = Field(0, ge=0, description="page text shown before and after the block (0: the code "
                                                    "alone, as the Archon replication guide's generate_code_summary(code))")
    max_tokens: int = Field(100, ge=1, description="the summary's length limit in tokens")
    concurrency: int = Field(4, ge=1, description="LLM requests in flight at once",
                             json_schema_extra=in_unit("requests"))


class EnrichmentConfig(StrictModel):
    """Contextual embeddings (Archon and the Archon replication guide): an LLM situates each chunk in its document."""

    enabled: bool = Field(False, description="embed each chunk with an LLM's note situating it in its document")
    base_url: str | None = Field(None, description="OpenAI-compatible chat endpoint; default OPENAI_BASE_URL")
    model: str | None = Field(None, description="chat model name at that endpoint")
    api_key_env: str = Field("OPENAI_API_KEY", description="name of the env var holding the key (never the key)")
    document_chars: int = Field(5000, ge=1, description="leading characters of the document shown to the LLM")
    max_tokens: int = Field(200, ge=1, description="the context note's length limit")
    concurrency: int = Field(4, ge=1, description="LLM requests in flight at once",
                             json_schema_extra=in_unit("requests"))
    code_examples: CodeExamplesConfig = Field(default_factory=CodeExamplesConfig,
                                              description="the code-example index (kbench/enrichment/code_examples.py)")
