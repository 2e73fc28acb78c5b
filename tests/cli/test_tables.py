"""Terminal tables print one number format: floats at four decimals, a column of whole values (counts logged as
floats) without, NaN as a dash; a metrics table at four decimals even where a value is whole."""
from __future__ import annotations

import math

from kbench.cli.tables import column_decimals, format_table


def test_every_float_column_has_four_decimals_unless_all_whole():
    assert column_decimals([488.0, 512.0]) == 0  # whole numbers stored as floats
    assert column_decimals([0.61234, 0.5]) == 4  # metrics
    assert column_decimals([462.9175, 3.5]) == 4
    assert column_decimals([12345.6]) == 4
    assert column_decimals([1.0, 0.9439]) == 4  # a recall@10 column holding a 1.0: not 3 decimals beside 4
    assert column_decimals([math.nan, 1, "text"]) == 0


def test_format_table_prints_each_float_column_at_its_own_precision():
    out = format_table(["name", "mean_chars", "p50", "ndcg", "missing"],
                       [["a", 462.9175, 485.0, 0.61234, math.nan], ["b", 12.5, 3.0, 0.5, 1.25]])
    header, rule, first, second = out.splitlines()
    assert first.split() == ["a", "462.9175", "485", "0.6123", "–"]
    assert second.split() == ["b", "12.5000", "3", "0.5000", "1.2500"]
    assert header.index("mean_chars") + len("mean_chars") == first.index("462.9175") + len("462.9175")  # right-aligned


def test_a_metrics_table_is_four_decimals_even_where_a_value_is_whole():
    from kbench.cli.tables import metrics_table

    table = metrics_table({"doc_recall_at_10": 1.0, "doc_recall_at_1": 0.5204, "doc_ndcg_at_10": 1.0,
                           "doc_ndcg_at_1": 0.551}, "doc")
    assert table.splitlines()[2].split() == ["recall", "0.5204", "1.0000"]


def test_a_long_torch_embedding_stage_names_the_faster_backend_with_this_machines_figures():
    from kbench.cli.tables import SLOW_EMBED_S, faster_backend_hint
    from kbench.embedding.choice import choice_for
    from kbench.embedding.config import EmbeddingConfig

    fast = choice_for(EmbeddingConfig(backend="fast"))  # the test run's tuning (tests/conftest.py tuning_store)
    slow = {"embed": SLOW_EMBED_S + 1.0}
    hint = faster_backend_hint(EmbeddingConfig(backend="torch"), slow)
    if fast.backend == "torch":  # nothing faster within the gate here: nothing to suggest
        assert hint is None
    else:
        assert hint.startswith(f"embedding took 31s on torch; --set embedding.backend=fast runs {fast.label} here: "
                               f"{fast.row.speedup:.2f}x torch's chunks/s, top-10 overlap")
        assert hint.endswith("(measured on this machine)")
    assert faster_backend_hint(EmbeddingConfig(backend="torch"), {"embed": SLOW_EMBED_S - 1.0}) is None  # quick
    assert faster_backend_hint(EmbeddingConfig(backend="openvino"), slow) is None  # already off torch
    assert faster_backend_hint(EmbeddingConfig(model="wordllama-l2-supercat", provider="static"), slow) is None


def test_a_run_says_which_backend_embedded_and_why_with_this_machines_figures():
    from kbench.cli.tables import backend_line
    from kbench.embedding.choice import choice_for
    from kbench.embedding.config import EmbeddingConfig

    exact = choice_for(EmbeddingConfig())
    line = backend_line(EmbeddingConfig())
    assert line.startswith(f"embedding backend: {exact.label}, exact: the fastest backend here whose vectors are "
                           f"torch's to f32 rounding: {exact.row.speedup:.2f}x torch's chunks/s, top-10 overlap 1.000")
    named = backend_line(EmbeddingConfig(backend="onnx-int8"))
    assert named.startswith("embedding backend: onnx-int8, set in the config; measured here: ")
    assert backend_line(EmbeddingConfig(model="wordllama-l2-supercat", provider="static")) is None
