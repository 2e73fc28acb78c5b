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
      max_configs: 1000       # every strategy: refuse a search of more candidate configs, before any work

The block changes which configs run, never a config's results, so it is not part of any run key.

Every strategy is bounded before it starts: the grid (and so a race's or a stage-wise search's configs, which are
its points) and the tuned candidates are counted without being built, with the memory holding them takes
(``PLAN_BYTES_PER_CONFIG`` each), and a search of more than ``max_configs`` candidates, or one whose estimate is
above half the memory available, is refused in one line naming the knob (``check_candidates``). A tuned range with
a tiny step once grew to 3 GB in 75 s before anything was scored.
"""
from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from kbench.errors import ConfigError, format_error
from kbench.registry import StrictModel

# what one candidate config takes to hold, validated, before it runs: 35 KB measured on configs/quickstart.yaml
# (tracemalloc over expand_sweep of 400 configs), rounded up
PLAN_BYTES_PER_CONFIG = 40_000
MAX_CONFIGS = 1000  # search.max_configs' default: 1,000 configs of the demo set take days on 2 cores already


def available_memory() -> int | None:
    """Bytes the kernel says a new allocation can take (MemAvailable), or None where that is unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_candidates(count: float, max_configs: int, what: str, knob: str) -> None:
    """Refuse ``count`` candidate configs above ``max_configs`` or above half the memory available (ValueError,
    one line naming ``knob``); ``count`` may be a float (a range's count before it is built), even inf."""
    shown = f"{count:,.0f}" if math.isfinite(count) and count < 1e15 else f"{count:.3g}"
    estimate = count * PLAN_BYTES_PER_CONFIG
    size = f"{estimate / 2**20:,.0f} MB" if estimate < 2**50 else "far more than any machine's memory"
    if count > max_configs:
        raise ValueError(f"{what}: {shown} candidate configs (about {size} to hold before the first is scored), "
                         f"more than search.max_configs ({max_configs:,}); {knob}, or raise search.max_configs")
    available = available_memory()
    if available is not None and estimate > available / 2:
        raise ValueError(f"{what}: {shown} candidate configs need about {size} to hold, more than half the "
                         f"{available / 2**20:,.0f} MB of memory available; {knob}")


def range_count(values: dict[str, float]) -> float:
    """How many values a ``{from, to, step}`` range expands to (a float: a tiny step gives a huge one, or inf)."""
    span = (values["to"] - values["from"]) / values["step"]
    return math.floor(span + 0.5) + 1 if math.isfinite(span) else math.inf


STAGES = ("chunking", "enrichment", "embedding", "store", "retrieval", "rerank", "query", "context")


class SearchConfig(StrictModel):
    strategy: Literal["grid", "race", "stagewise", "tune"] = "grid"
    alpha: float = Field(0.05, gt=0, lt=1, description="race: family-wise chance of dropping the best config")
    first: int | None = Field(None, ge=2, description="race: questions in the first batch")
    growth: float = Field(2.0, gt=1, description="race: factor by which the questions so far grow each round")
    seed: int = Field(0, ge=0, description="race: seed of the order questions are drawn in")
    test: Literal["t", "wilcoxon"] = "t"
    order: list[str] = Field(default_factory=lambda: ["chunking", "embedding", "retrieval", "rerank"],
                             description="stagewise: stages in the order their axes are fixed")
    check: bool = Field(False, description="stagewise: run every config one axis away from the result")
    race: bool = Field(False, description="stagewise: race each stage's configs instead of scoring each on every "
                                          "question (alpha, first, growth, seed, test as a race's; alpha split "
                                          "evenly over the stages with more than one config)")
    tune: dict[str, list[Any] | dict[str, float]] = Field(
        default_factory=dict, description="tune: retrieval.fusion knobs -> values, or {from, to, step}")
    max_configs: int = Field(MAX_CONFIGS, ge=1, description="every strategy: the most candidate configs a search "
                                                            "may have; more are refused before any work")

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
        if self.tune:
            counts = {knob: range_count(v) if isinstance(v, dict) else len(v) for knob, v in self.tune.items()}
            widest = max(counts, key=counts.get)
            knob = (f"give search.tune.{widest} a larger step" if isinstance(self.tune[widest], dict)
                    else f"give search.tune.{widest} fewer values")
            check_candidates(math.prod(counts.values()), self.max_configs, "search.tune", knob)
        return self

    def tune_values(self) -> dict[str, list[Any]]:
        """Each tuned knob's values, a range expanded (``{from: 0, to: 1, step: 0.25}`` -> 0, 0.25, ..., 1)."""
        out = {}
        for knob, values in self.tune.items():
            if isinstance(values, dict):  # bounded when the block loaded (check_candidates)
                n = int(range_count(values))
                values = [round(values["from"] + i * values["step"], 10) for i in range(n)]
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
