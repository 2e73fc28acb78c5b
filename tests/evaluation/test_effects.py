"""Factor effects equal a hand computation on a small grid (2 x 2 and a three-level factor)."""
import numpy as np
import pytest
from scipy import stats

from kbench.evaluation.effects import IncompleteGridError, effect_lines, factor_effects
from kbench.evaluation.significance import bootstrap_ci

# A grid of two factors (chunk 400 / 1000, rerank off / on), three questions each
SCORES = {"c400,off": [0.1, 0.2, 0.3], "c1000,off": [0.2, 0.2, 0.5],
          "c400,on": [0.3, 0.4, 0.3], "c1000,on": [0.6, 0.5, 0.9]}
LEVELS = {"c400,off": {"chunk": "400", "rerank": "off"}, "c1000,off": {"chunk": "1000", "rerank": "off"},
          "c400,on": {"chunk": "400", "rerank": "on"}, "c1000,on": {"chunk": "1000", "rerank": "on"}}
FACTORS = {"chunk": ["400", "1000"], "rerank": ["off", "on"]}


def by_key(effects):
    return {(e.kind, e.factor, e.at): e for e in effects}


def test_two_by_two_equals_hand_computation():
    effects = by_key(factor_effects(SCORES, LEVELS, FACTORS))
    # main effect of chunk: per question, mean of the 1000 configs minus mean of the 400 configs
    #   1000: (0.2+0.6)/2, (0.2+0.5)/2, (0.5+0.9)/2 = 0.4, 0.35, 0.7;  400: 0.2, 0.3, 0.3  -> 0.2, 0.05, 0.4
    main_chunk = effects[("main", "chunk", "")]
    assert main_chunk.mean == pytest.approx(0.65 / 3, abs=1e-12)
    assert main_chunk.change == "400 -> 1000"
    # main effect of rerank: on 0.45, 0.45, 0.6; off 0.15, 0.2, 0.4 -> 0.3, 0.25, 0.2
    assert effects[("main", "rerank", "")].mean == pytest.approx(0.25, abs=1e-12)
    # chunk's effect without rerank: 0.1, 0.0, 0.2; with rerank: 0.3, 0.1, 0.6
    assert effects[("simple", "chunk", "rerank=off")].mean == pytest.approx(0.1, abs=1e-12)
    assert effects[("simple", "chunk", "rerank=on")].mean == pytest.approx(1.0 / 3, abs=1e-12)
    # interaction: the difference of those: 0.2, 0.1, 0.4
    inter = effects[("interaction", "chunk x rerank", "")]
    assert inter.mean == pytest.approx(0.7 / 3, abs=1e-12)
    # its interval is the bootstrap interval of those per-question differences, its p the t-test against 0
    d = np.array([0.2, 0.1, 0.4])
    assert (inter.ci_low, inter.ci_high) == pytest.approx(bootstrap_ci(d), abs=1e-12)
    # t = mean / (sd / sqrt(3)) with sd of (0.2, 0.1, 0.4) = sqrt(0.046667 / 2)
    t = (0.7 / 3) / (np.sqrt((0.1 / 3) ** 2 + (0.4 / 3) ** 2 + (0.5 / 3) ** 2) / np.sqrt(2) / np.sqrt(3))
    assert inter.p_value == pytest.approx(2 * stats.t.sf(t, 2), rel=1e-9)
    assert inter.p_value == pytest.approx(stats.ttest_1samp(d, 0).pvalue, rel=1e-9)
    assert inter.n_queries == 3


def test_three_levels_average_over_the_other_factor():
    scores = dict(SCORES)
    levels = dict(LEVELS)
    scores.update({"c2000,off": [0.0, 0.1, 0.2], "c2000,on": [0.4, 0.1, 0.2]})
    levels.update({"c2000,off": {"chunk": "2000", "rerank": "off"}, "c2000,on": {"chunk": "2000", "rerank": "on"}})
    effects = factor_effects(scores, levels, {"chunk": ["400", "1000", "2000"], "rerank": ["off", "on"]})
    main = {e.change: e.mean for e in effects if e.kind == "main" and e.factor == "chunk"}
    # 2000: (0.0+0.4)/2, (0.1+0.1)/2, (0.2+0.2)/2 = 0.2, 0.1, 0.2; minus 400's 0.2, 0.3, 0.3 -> 0, -0.2, -0.1
    assert main["400 -> 2000"] == pytest.approx(-0.1, abs=1e-12)
    assert main["400 -> 1000"] == pytest.approx(0.65 / 3, abs=1e-12)
    # rerank's main effect now averages over three chunk levels: on (0.3+0.6+0.4)/3 ... per question
    on = np.mean([[0.3, 0.4, 0.3], [0.6, 0.5, 0.9], [0.4, 0.1, 0.2]], axis=0)
    off = np.mean([[0.1, 0.2, 0.3], [0.2, 0.2, 0.5], [0.0, 0.1, 0.2]], axis=0)
    rerank = next(e for e in effects if e.kind == "main" and e.factor == "rerank")
    assert rerank.mean == pytest.approx(float((on - off).mean()), abs=1e-12)
    inters = [e for e in effects if e.kind == "interaction"]
    assert [e.change for e in inters] == ["400 -> 1000 x off -> on", "400 -> 2000 x off -> on"]
    # 2000 x rerank: (0.4-0.3 - (0.0-0.1)), (0.1-0.4 - (0.1-0.2)), (0.2-0.3 - (0.2-0.3)) = 0.2, -0.2, 0 -> 0
    assert inters[1].mean == pytest.approx(0.0, abs=1e-12)


def test_incomplete_grid_is_refused_and_single_levels_are_no_factor():
    partial = {k: v for k, v in SCORES.items() if k != "c1000,on"}
    with pytest.raises(IncompleteGridError, match="1 combinations of the grid have no scores"):
        factor_effects(partial, LEVELS, FACTORS)
    only = factor_effects(SCORES, LEVELS, {"chunk": ["400", "1000"], "rerank": ["off"]})
    assert [(e.kind, e.factor) for e in only] == [("main", "chunk")]


def test_lines_name_every_effect():
    lines = effect_lines(factor_effects(SCORES, LEVELS, FACTORS), "chunk_ndcg_at_10")
    text = "\n".join(lines)
    assert "chunk 400 -> 1000 with rerank=on: +0.3333" in text
    assert "chunk x rerank 400 -> 1000 x off -> on: +0.2333" in text
