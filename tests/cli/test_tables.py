"""Terminal tables print numbers at about four significant digits: whole floats without decimals, metrics at
four places, large values with fewer, NaN as a dash."""
from __future__ import annotations

import math

from kbench.cli.tables import column_decimals, format_table


def test_column_decimals_follow_the_size_of_the_values():
    assert column_decimals([488.0, 512.0]) == 0  # whole numbers stored as floats
    assert column_decimals([0.61234, 0.5]) == 4  # metrics
    assert column_decimals([462.9175, 3.5]) == 1  # hundreds: one decimal keeps four digits
    assert column_decimals([12.345]) == 2
    assert column_decimals([12345.6]) == 1  # never fewer than one when a value has a fraction
    assert column_decimals([math.nan, 1, "text"]) == 0


def test_format_table_prints_each_float_column_at_its_own_precision():
    out = format_table(["name", "mean_chars", "p50", "ndcg", "missing"],
                       [["a", 462.9175, 485.0, 0.61234, math.nan], ["b", 12.5, 3.0, 0.5, 1.25]])
    header, rule, first, second = out.splitlines()
    assert first.split() == ["a", "462.9", "485", "0.6123", "–"]
    assert second.split() == ["b", "12.5", "3", "0.5000", "1.250"]
    assert header.index("mean_chars") + len("mean_chars") == first.index("462.9") + len("462.9")  # right-aligned


def test_a_long_torch_embedding_stage_names_the_faster_backend():
    from kbench.cli.tables import SLOW_EMBED_S, faster_backend_hint
    from kbench.embedding.config import EmbeddingConfig
    from kbench.embedding.models import fast_backend

    slow = {"embed": SLOW_EMBED_S + 1.0}
    hint = faster_backend_hint(EmbeddingConfig(), slow)
    assert hint is not None and f"runs {fast_backend('all-MiniLM-L6-v2')}" in hint and "took 31s on torch" in hint
    assert faster_backend_hint(EmbeddingConfig(), {"embed": SLOW_EMBED_S - 1.0}) is None  # quick: nothing to say
    assert faster_backend_hint(EmbeddingConfig(backend="openvino"), slow) is None  # already off torch
    assert faster_backend_hint(EmbeddingConfig(model="wordllama-l2-supercat", provider="static"), slow) is None
