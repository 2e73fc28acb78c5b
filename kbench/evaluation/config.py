"""The evaluation section: cutoffs, the relevance level and the span overlap rule."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from kbench.registry import StrictModel


class OverlapRule(StrictModel):
    """When does a chunk count as relevant to a reference span (span datasets)?"""

    rule: Literal["any", "min_chars", "min_fraction"] = "any"
    value: float = Field(0, ge=0, description="characters (min_chars) or fraction of the reference (min_fraction)")

    @model_validator(mode="after")
    def _fraction_at_most_one(self):
        if self.rule == "min_fraction" and self.value > 1:
            raise ValueError(f"value must be <= 1 with rule min_fraction (a fraction of the reference), got {self.value}")
        return self


class EvaluationConfig(StrictModel):
    k: list[int] = Field(default_factory=lambda: [1, 3, 5, 10], min_length=1)
    level: Literal["auto", "document", "chunk"] = Field(
        "auto", description="document: qrels on doc ids; chunk: relevance from span overlap; auto picks"
    )
    overlap: OverlapRule = Field(default_factory=OverlapRule)

    @field_validator("k")
    @classmethod
    def _positive_sorted(cls, v: list[int]) -> list[int]:
        if any(k < 1 for k in v):
            raise ValueError(f"every k must be >= 1, got {v}")
        return sorted(set(v))

