"""The ``search:`` block of a sweep config: how to search the grid instead of running every config.

    search:
      strategy: race          # grid (default: every config) | race | stagewise | tune
      alpha: 0.05             # race: the chance of dropping the truly best config, over all rounds
      first: 25               # race: questions in the first batch (default: an eighth, at least 10)
      growth: 2.0             # race: each batch brings the questions so far to growth x the last total
      seed: 0                 # race: the order questions are drawn in
      test: t                 # race: the paired test (t or wilcoxon)
      order: [chunking, embedding, retrieval, rerank]   # stagewise: the stages in the order they are fixed
      check: false            # stagewise: afterwards run every config one axis away from the result
      race: false             # stagewise: race the configs of each stage (alpha split over the stages raced)
      tune: {weight: {from: 0, to: 1, step: 0.1}}   # tune: fusion knobs chosen on half the questions

The block changes which configs run, never a config's results, so it is not part of any run key.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from kbench.errors import ConfigError, format_error
from kbench.registry import StrictModel

STAGES = ("chunking", "enrichment", "embedding", "store", "retrieval", "rerank", "query", "context")


class SearchConfig(StrictModel):
    strategy: Literal["grid", "race", "stagewise", "tune"] = "grid"
    alpha: float = Field(0.05, gt=0, lt=1, description="race: family-wise chance of dropping the best config")
    first: int | None = Field(None, ge=2, description="race: questions in the first batch")
    growth: float = Field(2.0, gt=1, description="race: factor by which the questions so far grow each round")
    seed: int = Field(0, description="race: seed of the order questions are drawn in")
    test: Literal["t", "wilcoxon"] = "t"
    order: list[str] = Field(default_factory=lambda: ["chunking", "embedding", "retrieval", "rerank"],
                             description="stagewise: stages in the order their axes are fixed")
    check: bool = Field(False, description="stagewise: run every config one axis away from the result")
    race: bool = Field(False, description="stagewise: race each stage's configs instead of scoring each on every "
                                          "question (alpha, first, growth, seed, test as a race's; alpha split "
                                          "evenly over the stages with more than one config)")
    tune: dict[str, list[Any] | dict[str, float]] = Field(
        default_factory=dict, description="tune: retrieval.fusion knobs -> values, or {from, to, step}")

    @model_validator(mode="after")
    def _known_stages(self):
        unknown = [s for s in self.order if s not in STAGES]
        if unknown:
            raise ValueError(f"order: unknown stages {unknown}; allowed: {', '.join(STAGES)}")
        if len(set(self.order)) != len(self.order):
            raise ValueError(f"order: a stage appears twice in {self.order}")
        if self.race and self.strategy != "stagewise":
            raise ValueError("race: true races within each stage of strategy: stagewise; to race the whole grid "
                             "set strategy: race")
        if self.strategy == "tune" and not self.tune:
            raise ValueError("tune: name the fusion knobs to tune, e.g. {weight: {from: 0, to: 1, step: 0.1}}")
        for knob, values in self.tune.items():
            if isinstance(values, dict) and (set(values) != {"from", "to", "step"} or values["step"] <= 0
                                             or values["to"] < values["from"]):
                raise ValueError(f"tune.{knob}: a range is {{from: A, to: B, step: S}} with A <= B and S > 0, "
                                 f"got {values}")
        return self

    def tune_values(self) -> dict[str, list[Any]]:
        """Each tuned knob's values, a range expanded (``{from: 0, to: 1, step: 0.25}`` -> 0, 0.25, ..., 1)."""
        out = {}
        for knob, values in self.tune.items():
            if isinstance(values, dict):
                n = int(round((values["to"] - values["from"]) / values["step"]))
                values = [round(values["from"] + i * values["step"], 10) for i in range(n + 1)]
            out[knob] = list(values)
        return out


def parse_search(value, origin: str) -> SearchConfig:
    if value is None:
        return SearchConfig()
    if not isinstance(value, dict):
        raise ConfigError(f"{origin}: search: must be a mapping, e.g. {{strategy: race}}, got {value!r}")
    try:
        return SearchConfig(**value)
    except ValidationError as e:
        raise ConfigError("\n".join(f"{origin}: " + format_error(err, "search", SearchConfig)
                                    for err in e.errors())) from None


def stage_of(path: str) -> str:
    """The stage a grid axis belongs to: its config section (``retrieval.fusion.k`` -> retrieval)."""
    return path.split(".", 1)[0]
