"""The evaluation section: cutoffs, the relevance level, the span overlap rule, token budgets, miss attribution
and slices."""
from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from kbench.errors import shorten
from kbench.evaluation.measures import Measure, parse_measure
from kbench.registry import StrictModel, in_unit

MAX_K = 1_000_000  # a cutoff beyond any corpus kbench ranks; a bigger one is a typo (and overflows int64 plots)


class OverlapRule(StrictModel):
    """When does a chunk count as relevant to a reference span (span datasets)?"""

    rule: Literal["any", "min_chars", "min_fraction"] = Field(
        "any", description="any: one shared character; min_chars: at least value characters; min_fraction: at least "
        "value of the reference")
    value: float = Field(0, ge=0, description="characters (min_chars) or fraction of the reference (min_fraction)")

    @model_validator(mode="after")
    def _fraction_at_most_one(self):
        if self.rule == "min_fraction" and self.value > 1:
            raise ValueError(f"value must be <= 1 with rule min_fraction (a fraction of the reference), got {self.value}")
        return self


RagasMetric = Literal["id_context_precision", "id_context_recall", "nonllm_context_precision",
                      "nonllm_context_recall", "llm_context_precision", "llm_context_recall"]


class RagasLLMConfig(StrictModel):
    """The chat endpoint that judges ragas' LLM metrics (``kbench serve`` or any OpenAI-compatible one)."""

    base_url: str | None = Field(None, description="OpenAI-compatible endpoint; default OPENAI_BASE_URL")
    model: str | None = Field(None, description="chat model name at that endpoint")
    api_key_env: str = Field("OPENAI_API_KEY", description="name of the env var holding the key (never the key)")
    max_tokens: int = Field(512, ge=1, description="tokens per judge answer")


class EvaluationConfig(StrictModel):
    k: list[int] = Field(default_factory=lambda: [1, 3, 5, 10], min_length=1,
                         description="cut-offs: every metric at each (doc_ndcg_at_10, ...)",
                         json_schema_extra=in_unit("ranks"))
    level: Literal["auto", "document", "chunk"] = Field(
        "auto", description="document: qrels on doc ids; chunk: relevance from span overlap; auto picks"
    )
    overlap: OverlapRule = Field(default_factory=OverlapRule)
    budgets: list[int] = Field(
        default_factory=list, description="token budgets (e.g. [500, 1000, 2000, 4000]): *_at_budget_<n> metrics "
                                          "keep ranked chunks until n tokens are spent (kbench.evaluation.budgets)",
                                          json_schema_extra=in_unit("tokens"))
    budget_tokenizer: str | None = Field(
        None, description="whose tokenizer counts budget tokens (kbench models list); default: embedding.model")
    miss_attribution: bool = Field(
        True, description="per query and relevant item, the stage where it was lost (miss_stage, miss_share_*) "
                          "and the oracle ceilings (ceiling_*)")
    miss_k: int | None = Field(None, ge=1, le=MAX_K, description="the cutoff a relevant item must reach to count as a hit; "
                                                        "default: the largest k", json_schema_extra=in_unit("rank"))
    slices: list[str] = Field(
        default_factory=list, description="per-query slice columns: doc_type, corpus, query_length, "
                                          "query.<metadata field>, doc.<metadata field> (kbench.evaluation.slices)")
    metrics: list[str] = Field(
        default_factory=list,
        description="ir_measures names (nDCG@10, R@100, RR@10, P(rel=2)@5, AP@100, Success@10) scored at document "
                    "and chunk level instead of every metric at every k; k still sets the span metrics' cutoffs")

    @field_validator("metrics")
    @classmethod
    def _measure_names(cls, v: list[str]) -> list[str]:
        problems = []
        for name in v:
            try:
                parse_measure(name)
            except ValueError as e:
                problems.append(str(e))
        if problems:
            raise ValueError("; ".join(problems))
        return v

    @property
    def measures(self) -> list[Measure]:
        return [parse_measure(name) for name in self.metrics]
    ragas: list[RagasMetric] = Field(default_factory=list, description="ragas context metrics (kbench.evaluation.ragas_eval)")
    ragas_k: int | None = Field(None, ge=1, le=MAX_K, description="top chunks handed to ragas; default: the largest k",
                                json_schema_extra=in_unit("chunks"))
    ragas_llm: RagasLLMConfig = Field(default_factory=RagasLLMConfig)

    @field_validator("k")
    @classmethod
    def _positive_sorted(cls, v: list[int]) -> list[int]:
        if any(k < 1 for k in v):
            raise ValueError(f"every k must be >= 1, got {v}")
        if any(k > MAX_K for k in v):
            raise ValueError(f"every k must be at most {MAX_K:,} (got {shorten(max(v), 40)}): no ranking kbench "
                             "builds is longer, and a k beyond retrieval.top_k scores results the run never returns")
        return sorted(set(v))

    @field_validator("budgets")
    @classmethod
    def _positive_budgets(cls, v: list[int]) -> list[int]:
        if any(n < 1 for n in v):
            raise ValueError(f"every budget must be >= 1 token, got {v}")
        return sorted(set(v))

    @field_validator("slices")
    @classmethod
    def _known_slices(cls, v: list[str]) -> list[str]:
        for key in v:
            if key not in SLICE_KEYS and not re.fullmatch(r"(query|doc)\.\w[\w.-]*", key):
                raise ValueError(f"unknown slice {key!r}; allowed: {', '.join(SLICE_KEYS)}, query.<metadata field>, "
                                 "doc.<metadata field>")
        return list(dict.fromkeys(v))

    @property
    def miss_cutoff(self) -> int:
        return self.miss_k or max(self.k)


SLICE_KEYS = ("doc_type", "corpus", "query_length")

