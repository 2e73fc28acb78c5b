"""The notebooks' curves (kbench/studies/plots.py): a mean per point with its t interval as an error bar, a y-axis
from 0 (issue 53 item 8: curves of means alone on an axis cut at the data)."""
from __future__ import annotations

import json
import math

import matplotlib
import numpy as np
import pytest

from kbench.studies import NOTEBOOKS_DIR
from kbench.studies.plots import curve, from_zero, interval

matplotlib.use("Agg")


def test_the_interval_is_students_t_over_the_scores_and_nan_is_left_out():
    from scipy import stats

    scores = [0.2, 0.5, 0.9, 0.4, float("nan"), 0.6]
    mean, low, high = interval(scores)
    kept = np.array([0.2, 0.5, 0.9, 0.4, 0.6])
    expected = stats.t.interval(0.95, len(kept) - 1, loc=kept.mean(), scale=stats.sem(kept))
    assert mean == pytest.approx(kept.mean()) and (low, high) == pytest.approx(expected)
    assert interval([0.5]) == (0.5, 0.5, 0.5) and interval([0.3, 0.3]) == (0.3, 0.3, 0.3)
    assert all(math.isnan(x) for x in interval([]))


def test_a_curve_draws_error_bars_and_the_axis_starts_at_zero():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    rng = np.random.default_rng(0)
    points = [rng.uniform(0.5, 0.7, 30), rng.uniform(0.55, 0.75, 30), rng.uniform(0.6, 0.8, 30)]
    means = curve(ax, [250, 500, 1000], points, label="fixed-600")
    assert means == pytest.approx([p.mean() for p in points])
    bars = ax.containers[0]  # an ErrorbarContainer: the line, its caps and its bars
    segments = bars.lines[2][0].get_segments()
    assert len(segments) == 3 and all(seg[0][1] < m < seg[1][1] for seg, m in zip(segments, means))
    from_zero(ax)
    assert ax.get_ylim() == (0, 1.02)  # shares: the whole scale, not 0.55-0.75
    fig2, ax2 = plt.subplots()
    curve(ax2, [1, 2], [[10.0, 12.0], [20.0, 22.0]])
    from_zero(ax2)
    top = max(seg[1][1] for seg in ax2.containers[0].lines[2][0].get_segments())  # the highest bar's end
    assert ax2.get_ylim() == (0, pytest.approx(top * 1.05))  # every bar whole
    plt.close("all")


@pytest.mark.parametrize("name", ["00_quickstart", "03_retrieval", "04_rerank", "07_diagnose"])
def test_every_curve_of_the_notebooks_has_intervals_and_starts_at_zero(name):
    source = "".join("".join(c["source"]) for c in json.loads((NOTEBOOKS_DIR / f"{name}.ipynb").read_text())["cells"]
                     if c["cell_type"] == "code")
    assert "curve(" in source and "from_zero(" in source and "interval_note(" in source
    assert ".plot(ks" not in source and "marker=\"o\", logx=True" not in source  # no bare line of means
