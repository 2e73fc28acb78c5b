"""Token, request, retry and cache counts per stage, and their cost from the price table.

One ``UsageMeter`` per run; each client adds to its stage's counters (thread-safe). ``metrics(prices)``
gives flat MLflow metric names: ``llm_<stage>_<counter>`` and ``llm_total_<counter>``.

``unusable_answers`` counts answers that arrived but that the stage could not use (a rerank answer with no
index list, an empty rewrite, an empty enrichment context, a ragas verdict it could not parse): the stage adds
them (``LLMClient.count_unusable``), since only it knows what it asked for. A stage that quietly fell back
would otherwise log a result that looks like the model's. ``partial`` (only where set) counts a stage that went on
below ``llm.policy.min_usable`` because ``allow_partial`` let it (kbench/llm/usable.py).
"""
from __future__ import annotations

import threading
from collections import defaultdict

from kbench.llm.config import ModelPrice

COUNTERS = ("requests", "cache_hits", "retries", "failures", "unusable_answers", "prompt_tokens", "completion_tokens")


class UsageMeter:
    def __init__(self):
        self._lock = threading.Lock()
        # (stage, model) -> counter -> value
        self._counts: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: dict.fromkeys(COUNTERS, 0))

    def add(self, stage: str, model: str, **counts: float) -> None:
        with self._lock:
            row = self._counts[(stage, model)]
            for name, value in counts.items():
                row[name] = row.get(name, 0) + value

    def merge(self, other: "UsageMeter") -> None:
        for (stage, model), row in other.snapshot().items():
            self.add(stage, model, **row)

    def snapshot(self) -> dict[tuple[str, str], dict[str, float]]:
        with self._lock:
            return {key: dict(row) for key, row in self._counts.items()}

    def stage_totals(self, prices: dict[str, ModelPrice] | None = None) -> dict[str, dict[str, float]]:
        """stage -> counters plus ``cost_usd`` (tokens of requests actually sent; a cache hit costs nothing)."""
        prices = prices or {}
        out: dict[str, dict[str, float]] = {}
        for (stage, model), row in self.snapshot().items():
            price = prices.get(model, ModelPrice())
            cost = (row["prompt_tokens"] * price.input_per_million
                    + row["completion_tokens"] * price.output_per_million) / 1e6
            total = out.setdefault(stage, dict.fromkeys((*COUNTERS, "cost_usd"), 0.0))
            for name, value in row.items():
                total[name] = total.get(name, 0.0) + value
            total["cost_usd"] += cost
        return out

    def metrics(self, prices: dict[str, ModelPrice] | None = None) -> dict[str, float]:
        per_stage = self.stage_totals(prices)
        out: dict[str, float] = {}
        totals: dict[str, float] = {}
        for stage, row in sorted(per_stage.items()):
            for name, value in row.items():
                out[f"llm_{stage}_{name}"] = float(value)
                totals[name] = totals.get(name, 0.0) + value
        out.update({f"llm_total_{name}": float(v) for name, v in totals.items()})
        return out

    def __bool__(self) -> bool:
        return bool(self.snapshot())
