"""The ``query`` section: what is searched instead of (or beside) the question (the GWI spec's query processing).

Each pre-stage is off by default. ``expansion`` adds synonyms from a configured list (no LLM) or asks the
LLM to rewrite the query; ``decomposition`` asks the LLM to split the question, searches each part and fuses
the parts' rankings with RRF; ``hyde`` embeds a hypothetical answer the LLM writes instead of the question.
The LLM ones name their endpoint like every LLM stage (``base_url``, ``model``, ``api_key_env``).
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from kbench.registry import StrictModel, in_unit, rename_keys


class QueryLLM(StrictModel):
    base_url: str | None = Field(None, description="OpenAI-compatible endpoint; default OPENAI_BASE_URL")
    model: str | None = Field(None, description="chat model name at that endpoint")
    api_key_env: str = Field("OPENAI_API_KEY", description="name of the env var holding the key (never the key)")
    max_tokens: int = Field(64, ge=1, description="tokens per rewrite")
    temperature: float | None = Field(0.0, description="0: the same rewrite every run")


class ExpansionConfig(QueryLLM):
    enabled: bool = Field(False, description="search each question with its expansion appended")
    strategy: Literal["synonyms", "llm"] = Field("synonyms", description="synonyms: from the list below; llm: the "
                                                 "LLM rewrites the query")
    synonyms: dict[str, list[str]] = Field(default_factory=dict,
                                           description="term -> synonyms appended when the term is in the query")

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        return rename_keys(data, {"method": "strategy"}, "query.expansion")

    @model_validator(mode="after")
    def _synonyms_given(self):
        if self.enabled and self.strategy == "synonyms" and not self.synonyms:
            raise ValueError("strategy 'synonyms' needs a synonyms list (term: [synonym, ...]); or use strategy llm")
        return self


class DecompositionConfig(QueryLLM):
    enabled: bool = Field(False, description="split each question into parts, search each, fuse by RRF")
    max_parts: int = Field(3, ge=1, description="sub-questions kept from the LLM's answer",
                           json_schema_extra=in_unit("parts"))
    include_original: bool = Field(True, description="search the question itself as one more part")
    rrf_k: int = Field(60, ge=1, description="RRF constant fusing the parts' rankings")
    max_tokens: int = Field(96, ge=1, description="tokens of the LLM's list of parts")


class HydeConfig(QueryLLM):
    enabled: bool = Field(False, description="search an LLM's hypothetical answer instead of the question")
    max_tokens: int = Field(96, ge=1, description="tokens of the hypothetical answer")


class QueryConfig(StrictModel):
    expansion: ExpansionConfig = Field(default_factory=ExpansionConfig)
    decomposition: DecompositionConfig = Field(default_factory=DecompositionConfig)
    hyde: HydeConfig = Field(default_factory=HydeConfig)

    @property
    def active(self) -> bool:
        return self.expansion.enabled or self.decomposition.enabled or self.hyde.enabled
