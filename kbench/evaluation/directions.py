"""Which way is better for a metric, and which metrics are a percentile of a per-query column.

    lower_is_better("latency_ms_total")       # True: latencies, costs and seconds are lower-is-better
    lower_is_better("chunk_ndcg_at_10")       # False: every quality metric is higher-is-better
    percentile_of("latency_ms_total_p95")     # ("latency_ms_total", 95.0): a run's p95 of a per-query column

One place for the rule, so ``kbench compare`` ranks a latency with the fastest first and the recommendation
never reads a latency or a cost as a quality.
"""
from __future__ import annotations

import re

PERCENTILE = re.compile(r"^(?P<column>latency_ms_\w+?)_p(?P<q>\d{1,2})$")
LOWER_PREFIXES = ("latency_ms_", "cost_", "time_s_")
LOWER_SUFFIXES = ("_seconds", "_cost_usd", "_ms")


def lower_is_better(metric: str) -> bool:
    """Latency (``latency_ms_*``), cost (``cost_*``, ``*_cost_usd``) and time (``time_s_*``, ``*_seconds``,
    ``*_ms``): lower is better. Everything else a run logs per question (nDCG, recall, MRR, span metrics, ...) is a quality."""
    return metric.startswith(LOWER_PREFIXES) or metric.endswith(LOWER_SUFFIXES)


def percentile_of(metric: str) -> tuple[str, float] | None:
    """``latency_ms_<stage>_p<q>`` -> (``latency_ms_<stage>``, q): the per-query column it is a percentile of;
    None for any other name."""
    found = PERCENTILE.match(metric)
    return (found["column"], float(found["q"])) if found else None
