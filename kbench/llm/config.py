"""The ``llm`` section: how every LLM/API stage talks to its endpoint (retries, concurrency) and what it costs.

Each stage names its own endpoint and model (``enrichment.base_url``/``model``, ``rerank.params``,
``embedding.base_url``, ``query.*``); this section holds what they share: the retry and concurrency policy
and a price table, so cost is computed from token counts, never guessed.
"""
from __future__ import annotations

from pydantic import Field

from kbench.registry import StrictModel, in_unit


class LLMPolicy(StrictModel):
    """Retries, backoff and concurrency of the one client (kbench.llm.client.LLMClient)."""

    concurrency: int = Field(4, ge=1, description="requests in flight at once per stage",
                             json_schema_extra=in_unit("requests"))
    max_retries: int = Field(5, ge=0, description="retries of a 429/5xx/timeout/malformed answer before an item fails",
                             json_schema_extra=in_unit("retries"))
    backoff_base_s: float = Field(0.5, gt=0, description="first backoff in seconds; doubles per retry, full jitter")
    backoff_max_s: float = Field(20.0, gt=0, description="longest backoff in seconds")
    retry_after_max_s: float = Field(60.0, gt=0, description="longest Retry-After honoured, in seconds")
    timeout_s: float = Field(60.0, gt=0, description="seconds to wait for one response")
    connect_timeout_s: float = Field(3.0, gt=0, description="seconds to wait for a connection")
    batch_size: int = Field(64, ge=1, description="texts per embeddings request", json_schema_extra=in_unit("texts"))
    min_usable: float = Field(0.8, ge=0, le=1, description="share of a stage's answers that must be usable (a "
                              "grade, a context, a ranking ...); below it the stage stops with exit 2 "
                              "(kbench/llm/usable.py)")
    allow_partial: bool = Field(False, description="go on below min_usable: said on stderr, metric "
                                "llm_<stage>_partial and tag kbench.llm.partial on the run (--allow-partial)")


class ModelPrice(StrictModel):
    """US dollars per million tokens (the unit every provider's price page uses)."""

    input_per_million: float = Field(0.0, ge=0)
    output_per_million: float = Field(0.0, ge=0)


class LLMConfig(StrictModel):
    policy: LLMPolicy = Field(default_factory=LLMPolicy)
    prices: dict[str, ModelPrice] = Field(default_factory=dict, description="model name -> price; unlisted: cost 0")
