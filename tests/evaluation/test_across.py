"""One pick across evaluation sets on hand-built per-query tables: two sets that reverse each other's top never give
a decided pick, and the lines say where they disagree; sets that agree decide, the cheapest decided config first;
each set's bounds are at alpha / S; a config in one set only is left out."""
from __future__ import annotations

import numpy as np
import pytest

from kbench.evaluation.across import recommend_across
from kbench.evaluation.bound import pick_bound
from kbench.evaluation.recommend import ConfigRecord, Evidence, PairedT, RecommendConfig

HEADLINE = "chunk_ndcg_at_10"
ONLY_HEADLINE = RecommendConfig(guards=[])


def set_of(shifts: dict[str, float], n: int, seed: int, sd: float = 0.05,
           costs: dict[str, float] | None = None) -> list[ConfigRecord]:
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.2, 0.7, n)
    return [ConfigRecord(label, {HEADLINE: base + shift + rng.normal(0, sd, n)},
                         {"cost_index_bytes": (costs or {}).get(label, 100.0)}) for label, shift in shifts.items()]


def test_two_sets_that_reverse_the_top_never_give_a_decided_pick_and_say_where():
    heading = set_of({"bm25": 0.10, "hybrid": 0.0, "vector": -0.2}, 60, 1)  # heading: BM25 ahead by 0.1
    ict = set_of({"bm25": 0.0, "hybrid": 0.10, "vector": -0.1}, 60, 2)  # ict: the hybrid ahead by 0.1
    found = recommend_across({"heading": heading, "ict": ict}, HEADLINE, ONLY_HEADLINE)
    # each set decides its own top; neither decides the other's, so no config is decided across them
    assert found.per_set["heading"].config == "bm25" and found.per_set["heading"].decided
    assert found.per_set["ict"].config == "hybrid" and found.per_set["ict"].decided
    assert not found.decided and found.deciding != ["heading", "ict"]
    assert found.pick == min(found.labels, key=found.worst)
    assert found.worst(found.pick) > 0.01
    other = {"heading": "bm25", "ict": "hybrid"}
    assert found.reversals() and all(other[name] in better for name, better in found.reversals().items())
    lines = found.lines()
    verdict = next(line for line in lines if line.startswith("recommendation across sets: "))
    assert verdict.startswith(f"recommendation across sets: provisional: {found.pick} (the smallest worst bound: no "
                              f"config here is better than it by more than {found.worst(found.pick):.4f} on "
                              f"{HEADLINE} on any of the 2 sets (95%, Bonferroni over the sets and the configs)); "
                              "the sets cannot decide it at the 0.01 margin: ")
    assert "the sets disagree on the top: heading puts bm25 first; ict puts hybrid first" in lines
    assert any(line.startswith("  on ict, behind hybrid: bm25 -0.") for line in lines)
    assert any(line.startswith(f"  {name} reverses the pick: it shows ") for name in found.reversals()
               for line in lines)
    assert found.as_dict()["decided"] is False and found.as_dict()["tops"] == {"heading": "bm25", "ict": "hybrid"}


def test_sets_that_agree_decide_and_the_cheapest_decided_config_is_the_pick():
    costs = {"big": 1000.0, "small": 10.0, "poor": 0.0}
    a = set_of({"big": 0.002, "small": 0.0, "poor": -0.3}, 200, 3, sd=0.005, costs=costs)
    b = set_of({"big": 0.0, "small": 0.001, "poor": -0.3}, 150, 4, sd=0.005, costs=costs)
    found = recommend_across({"a": a, "b": b}, HEADLINE, RecommendConfig(guards=[], margin=0.01))
    assert all(found.decides(c, n) for c in ("big", "small") for n in "ab")
    assert found.decided and found.pick == "small" and found.reversals() == {}
    assert found.lines()[found.lines().index(found.verdict())].startswith(
        "recommendation across sets: small (decided on every set at the 0.01 margin: no config here is better than it "
        "by more than ")
    assert "also decided on every set: big (cost_index_bytes 1,000)" in found.verdict()
    assert "the sets agree on the top by mean: " in "\n".join(found.lines())


def test_each_sets_bounds_are_at_alpha_over_the_sets():
    a = set_of({"x": 0.02, "y": 0.0, "z": -0.05}, 40, 5)
    b = set_of({"x": 0.01, "y": 0.0, "z": -0.05}, 30, 6)
    c = set_of({"x": 0.03, "y": 0.0, "z": -0.05}, 50, 7)
    found = recommend_across({"a": a, "b": b, "c": c}, HEADLINE, ONLY_HEADLINE)
    assert found.level == pytest.approx(0.05 / 3)
    direct = pick_bound(b[0], b[1:], HEADLINE, estimator=PairedT(), alpha=0.05 / 3)
    assert found.bound("x", "b") == pytest.approx(direct.value)
    assert found.worst("x") == max(found.bound("x", n) for n in "abc")
    assert found.per_set["b"].alpha == pytest.approx(0.05 / 3)
    assert found.questions == {"a": 40, "b": 30, "c": 50}
    assert "(95% over the 3 sets, simultaneous over 2 configs by Bonferroni)" in found.per_set["a"].lines()[1]


def test_configs_missing_from_a_set_are_left_out_and_the_pick_carries_each_sets_warnings():
    a = set_of({"x": 0.05, "y": 0.0, "only-a": 0.2}, 40, 8)
    b = set_of({"x": 0.05, "y": 0.0}, 40, 9)
    evidence = {"a": Evidence(warnings={"x": ("embedding model all-MiniLM-L6-v2 covers en: 0% of the documents",)},
                              corpus="the indexed copy lost 40 heading lines"), "b": Evidence()}
    found = recommend_across({"a": a, "b": b}, HEADLINE, ONLY_HEADLINE, evidence=evidence)
    assert found.labels == ["x", "y"] and found.left_out == {"only-a": "only in a"}
    assert found.lines()[-1] == "left out (not in every set): only-a (only in a)"
    assert found.pick == "x"
    assert "  warning on x (a): embedding model all-MiniLM-L6-v2 covers en: 0% of the documents" in found.lines()
    assert "  a's documents: the indexed copy lost 40 heading lines" in found.lines()
    with pytest.raises(ValueError, match="at least 2 sets"):
        recommend_across({"a": a}, HEADLINE)
    with pytest.raises(ValueError, match="share 1 config labels"):
        recommend_across({"a": a[:1], "b": b}, HEADLINE)
