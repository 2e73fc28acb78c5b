"""Score normalizations on hand-checked lists (ranx parity on real legs: test_fusion_ranx_parity.py)."""
from __future__ import annotations

import numpy as np
import pytest

from kbench.retrieval.fusion.normalization import NORMALIZATIONS, normalize


def test_min_max():
    assert normalize([0.9, 0.5, 0.1], "min-max") == pytest.approx([1.0, 0.5, 0.0])
    assert normalize([3.0, 3.0], "min-max") == pytest.approx([0.0, 0.0])  # ranx: denominator floored at 1e-9


def test_z_score_uses_population_std():
    # mean 0.5, population std sqrt(((0.4)^2 + 0 + (0.4)^2) / 3)
    std = np.sqrt(0.32 / 3)
    assert normalize([0.9, 0.5, 0.1], "z-score") == pytest.approx([0.4 / std, 0.0, -0.4 / std])


def test_rank_ignores_scores():
    assert normalize([10.0, 10.0, 1.0, 0.5], "rank") == pytest.approx([1.0, 0.75, 0.5, 0.25])


def test_dbsf_maps_three_sigma_band_to_unit_interval():
    scores = np.array([0.9, 0.5, 0.1])
    std = scores.std()
    low = 0.5 - 3 * std
    assert normalize(scores, "dbsf") == pytest.approx((scores - low) / (6 * std))
    assert normalize(scores, "dbsf")[1] == pytest.approx(0.5)  # the mean maps to the middle
    assert normalize([2.0], "dbsf") == pytest.approx([0.0])


def test_none_and_empty_lists():
    assert normalize([7.0, 2.0], "none") == pytest.approx([7.0, 2.0])
    for name in NORMALIZATIONS:
        assert normalize([], name).shape == (0,)


def test_unknown_name_lists_the_allowed_ones():
    with pytest.raises(ValueError, match="min-max"):
        normalize([1.0], "softmax")


def test_the_names_a_config_may_give_are_the_methods():
    from typing import get_args

    from kbench.retrieval.fusion.normalization import Normalization

    assert list(NORMALIZATIONS) == list(get_args(Normalization))
