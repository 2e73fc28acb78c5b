"""The recommendation rule on hand-built per-query tables: a cheap config truly within the margin is chosen, a
cheap config merely tied is not, budgets exclude, a relative margin, every guard must pass, the set that cannot
decide says so with its MDE and the questions it needs; and the recommend section's checks."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from kbench.compare import RunScores, compare_scores
from kbench.compare.recommendation import recommend_comparison
from kbench.config import ConfigError, load_experiment
from kbench.evaluation.recommend import ConfigRecord, RecommendConfig, recommend, resolve_metrics
from kbench.evaluation.significance import (holm, minimum_detectable_difference, non_inferiority,
                                            questions_to_decide, rank_against_best)

N = 60
BASE = np.random.default_rng(11).uniform(0.3, 0.7, N)
HEADLINE = "chunk_ndcg_at_10"
ONLY_HEADLINE = RecommendConfig(guards=[])


def record(label: str, ndcg, cost: float | None = None, latency_ms=1.0, **more) -> ConfigRecord:
    n = len(ndcg)
    per_query = {HEADLINE: np.asarray(ndcg, dtype=float),
                 "latency_ms_total": np.broadcast_to(np.asarray(latency_ms, dtype=float), (n,)).copy(),
                 **{k: np.asarray(v, dtype=float) for k, v in more.items()}}
    return ConfigRecord(label, per_query, {} if cost is None else {"cost_index_bytes": cost})


def noise(seed: int, sd: float, n: int = N) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, sd, n)


def test_a_cheap_config_truly_within_the_margin_is_chosen_and_the_set_decides():
    records = [record("best", BASE + 0.004, 1_000_000), record("cheap", BASE + noise(1, 0.002), 0),
               record("worse", BASE - 0.2, 0)]
    found = recommend(records, HEADLINE, ONLY_HEADLINE)
    test = found.versus_best["cheap"].tests[HEADLINE]
    assert test.lower_bound > -0.01 and found.versus_best["cheap"].shown  # within the 0.01 margin, shown
    assert not found.versus_best["worse"].shown
    assert found.best == "best" and found.within_margin == ["best", "cheap"]
    assert found.config == "cheap" and found.decided and found.undecided == []
    assert found.lines()[0] == (
        f"recommendation: cheap (within the 0.01 margin of the best, best, on {HEADLINE}: {HEADLINE} "
        f"{BASE.mean() + noise(1, 0.002).mean():.4f} against {BASE.mean() + 0.004:.4f}, lower bound "
        f"{test.lower_bound:+.4f}; the cheapest of 2 such configs: cost_index_bytes 0; shown within the 0.01 "
        f"margin of every other config on {HEADLINE}, {N} questions)")
    assert found.lines()[1].startswith(f"  bound: no config here is better than cheap by more than {found.bound:.4f} "
                                       f"on {HEADLINE} (95%, simultaneous over 2 configs by Bonferroni), so the set "
                                       "decides it at any margin above that; ruled out (shown worse than it by more "
                                       "than the 0.01 margin): worse")
    assert found.lines()[2] == ("  also within the margin of the best: best (the best itself, cost_index_bytes "
                                "1,000,000)")


def test_a_cheap_config_merely_tied_is_not_chosen_and_the_best_is_provisional():
    n = 20
    base = BASE[:n]
    records = [record("best", base + 0.01, 1_000_000), record("cheap-tied", base + noise(2, 0.15, n), 0)]
    scores = {r.label: r.per_query[HEADLINE] for r in records}
    assert [v.verdict for v in rank_against_best(scores)] == ["best", "tied"]  # the old rule's "tie"
    found = recommend(records, HEADLINE, ONLY_HEADLINE)
    assert not found.versus_best["cheap-tied"].shown  # not significantly worse is not shown as good
    assert found.config == "best" and not found.decided and found.undecided == ["cheap-tied"]
    d = records[0].per_query[HEADLINE] - records[1].per_query[HEADLINE]
    mde = minimum_detectable_difference(float(d.std(ddof=1)), n, 0.05)
    needed = questions_to_decide(float(d.std(ddof=1)), 0.01, 0.05, 0.8)
    line = found.lines()[0]
    assert line.startswith(f"recommendation: provisional: best (the best on {HEADLINE}, ")
    assert line.endswith(f"; the set cannot decide: it is not shown within the 0.01 margin of cheap-tied (the set's "
                         f"minimum detectable difference on {HEADLINE} is {mde:.4f} at {n} questions; if they are truly "
                         f"equal, about {needed:,} questions would show it at the 0.01 margin)")
    assert "tied" not in line.replace("cheap-tied", "") and "equivalent" not in line
    # the cheaper config the set cannot judge is said too, with what deciding would take
    assert found.cheaper_unresolved == ["cheap-tied"]
    assert any(x.startswith("  cheaper and left open by the set: not shown within the margin of the best, nor worse "
                            f"than it, and within the minimum detectable difference ({mde:.4f}): cheap-tied "
                            "(cost_index_bytes 0;") for x in found.lines())


def test_a_budget_excludes_configs_and_the_lines_name_each_and_why():
    records = [record("slow-best", BASE + 0.05, 100, latency_ms=72.8), record("fast", BASE, 100, latency_ms=23.9),
               record("costly", BASE + 0.04, 5_000, latency_ms=10.0)]
    found = recommend(records, HEADLINE, RecommendConfig(guards=[], latency_budget_ms=50, cost_budget=1_000))
    assert found.excluded == {"slow-best": "p95 72.80 ms over the 50 ms budget",
                              "costly": "cost_index_bytes 5,000 over the 1,000 budget"}
    assert found.config == "fast" and found.order == ["fast"]
    assert found.lines()[0] == ("recommendation: fast (the only config within the budgets: p95 latency of total at "
                                "most 50 ms; cost_index_bytes at most 1,000)")
    assert "  excluded: slow-best (p95 72.80 ms over the 50 ms budget); costly (cost_index_bytes 5,000 over the "\
           "1,000 budget)" in found.lines()
    none = recommend(records, HEADLINE, RecommendConfig(guards=[], latency_budget_ms=5))
    assert none.config is None and not none.decided
    assert none.lines()[0] == "recommendation: none: every config is over a budget (p95 latency of total at most 5 ms)"
    # a stage's budget: a config without the stage spends nothing in it; a latency the runs lack cannot be checked
    staged = [record("a", BASE, 1, **{"latency_ms_leg_vector": np.full(N, 9.0)}), record("b", BASE - 0.3, 1)]
    found = recommend(staged, HEADLINE, RecommendConfig(guards=[], latency_budget_ms=5, latency_stage="leg_vector"))
    assert found.latency == {"a": 9.0, "b": 0.0} and found.config == "b"
    assert found.excluded == {"a": "p95 9.00 ms over the 5 ms budget"}
    unmeasured = [ConfigRecord("x", {HEADLINE: BASE}), ConfigRecord("y", {HEADLINE: BASE})]
    found = recommend(unmeasured, HEADLINE, RecommendConfig(guards=[], latency_budget_ms=5))
    assert found.config is None and found.excluded["x"].startswith("latency_ms_total not measured")


def test_latency_never_settles_equal_costs_the_better_headline_mean_does():
    records = [record("a", BASE + 0.003, 100, latency_ms=0.44), record("b", BASE + noise(3, 0.001), 100,
                                                                       latency_ms=0.22)]
    found = recommend(records, HEADLINE, ONLY_HEADLINE)
    assert found.within_margin == ["a", "b"] and found.config == "a"  # equal costs: the better mean, not 0.22 ms
    # no cost logged at all: said, and the better mean decides
    records = [record("a", BASE + 0.003, latency_ms=0.44), record("b", BASE + noise(3, 0.001), latency_ms=0.22)]
    found = recommend(records, HEADLINE, ONLY_HEADLINE)
    assert found.config == "a" and found.left_out["cost_index_bytes"].startswith("not logged by these runs")


def test_a_relative_margin_is_a_share_of_the_reference_mean():
    cheap = BASE - 0.015 + noise(4, 0.003)
    records = [record("best", BASE, 100), record("cheap", cheap, 0)]
    absolute = recommend(records, HEADLINE, RecommendConfig(guards=[], margin=0.01))
    assert absolute.config == "best" and not absolute.versus_best["cheap"].shown
    relative = recommend(records, HEADLINE, RecommendConfig(guards=[], margin="5%"))
    test = relative.versus_best["cheap"].tests[HEADLINE]
    assert test.margin == pytest.approx(0.05 * BASE.mean())
    assert relative.config == "cheap" and relative.versus_best["cheap"].shown and relative.margin == "5%"
    assert "within the 5% margin of the best, best" in relative.lines()[0]


def test_every_guard_must_pass_one_p_value_per_config_and_holm_over_the_configs():
    recall = np.clip(BASE + 0.1, 0, 1)
    records = [record("best", BASE + 0.004, 100, chunk_recall_at_10=recall),
               record("cheap-bad-recall", BASE + noise(5, 0.002), 0, chunk_recall_at_10=recall - 0.2),
               record("cheap-good", BASE + noise(6, 0.002), 10, chunk_recall_at_10=recall + noise(7, 0.002))]
    config = RecommendConfig(guards=["recall_at_10"])
    found = recommend(records, HEADLINE, config)
    assert found.metrics == [HEADLINE, "chunk_recall_at_10"]
    bad = found.versus_best["cheap-bad-recall"]
    assert bad.tests[HEADLINE].p_value < 0.05 and not bad.shown and bad.weakest == "chunk_recall_at_10"
    assert found.config == "cheap-good"  # the cheapest of those within the margin on both metrics
    for label, v in found.versus_best.items():  # intersection-union: the largest p over the metrics
        assert v.p_value == max(t.p_value for t in v.tests.values())
        best, cand = records[0].per_query, next(r for r in records if r.label == label).per_query
        assert v.tests[HEADLINE].p_value == non_inferiority(best[HEADLINE], cand[HEADLINE], 0.01).p_value
    labels = list(found.versus_best)
    assert [found.versus_best[c].p_adjusted for c in labels] == pytest.approx(
        list(holm([found.versus_best[c].p_value for c in labels])))


def test_decided_is_on_the_headline_a_config_ahead_on_a_guard_is_a_trade_off_it_settles():
    recall = np.clip(BASE, 0, 1)
    records = [record("best", BASE + 0.3, 100, chunk_recall_at_10=recall),
               record("recall-strong", BASE, 100, chunk_recall_at_10=recall + 0.2)]
    found = recommend(records, HEADLINE, RecommendConfig(guards=["recall_at_10"]))
    assert found.config == "best" and found.decided and list(found.versus_pick["recall-strong"].tests) == [HEADLINE]


def test_guards_take_the_headline_level_and_unmeasured_ones_are_said():
    assert resolve_metrics(HEADLINE, ["doc_ndcg_at_10", "chunk_ndcg_at_10", "recall_at_10"]) == [
        HEADLINE, "doc_ndcg_at_10", "chunk_recall_at_10"]
    assert resolve_metrics("doc_ndcg_at_10", ["recall_at_5"]) == ["doc_ndcg_at_10", "doc_recall_at_5"]
    records = [record("a", BASE, 1, chunk_recall_at_10=BASE), record("b", BASE - 0.3, 1, chunk_recall_at_10=BASE)]
    found = recommend(records, HEADLINE, RecommendConfig())  # the default guards
    assert found.metrics == [HEADLINE, "chunk_recall_at_10"]
    assert found.left_out == {"doc_ndcg_at_10": "not measured by these runs"}
    assert found.lines()[-1] == "  left out: doc_ndcg_at_10 (not measured by these runs)"
    assert found.config == "a" and found.decided


def test_a_comparison_recommends_by_its_own_alpha_and_quality_headline():
    index = pd.Index([f"q{i:02d}" for i in range(N)], name="query_id")
    runs = []
    for seed, (label, shift, cost) in enumerate((("base", 0.0, 100.0), ("close", -0.002, 0.0), ("far", -0.2, 0.0))):
        frame = pd.DataFrame({HEADLINE: np.clip(BASE + shift + noise(9 + seed, 0.002), 0, 1),
                              "latency_ms_total": np.full(N, 1.0)}, index=index)
        runs.append(RunScores(label, f"id-{label}", frame, f"id-{label}", "baseline" if label == "base" else "",
                              {"cost_index_bytes": cost}))
    cmp = compare_scores(runs, metrics=["latency_ms_total_p95", HEADLINE])  # ranked on a latency first
    found = recommend_comparison(cmp, ONLY_HEADLINE)
    assert found.headline == HEADLINE and found.config == "close" and found.decided
    assert found.as_dict()["config"] == "close"
    # issue 50 item 4: the ranking printed beside it is the one that says which configs are worse than the best
    ranking = cmp.ranking(HEADLINE)
    assert found.shown_worse == [c for c, v in zip(ranking["config"], ranking["vs_best"]) if v == "worse"]
    assert found.shown_worse == ["close", "far"]  # close is worse by 0.002, and within the 0.01 margin: both hold


def test_the_recommend_section_is_checked_and_changes_no_run_key(tmp_path):
    base = {"dataset": {"name": "demo"}, "workspace": str(tmp_path)}
    plain = load_experiment(base)
    guarded = load_experiment({**base, "recommend": {"guards": ["recall_at_5"], "cost": "cost_embed_seconds",
                                                     "margin": "2%", "latency_budget_ms": 50}})
    assert guarded.recommend.guards == ["recall_at_5"] and plain.recommend.guards[0] == "doc_ndcg_at_10"
    assert plain.recommend.margin == 0.01 and guarded.recommend.margin_text() == "2%"
    assert guarded.run_key() == plain.run_key()
    for bad, match in (({"guards": ["nDCG@10"]}, "recommend.guards"),
                       ({"gaurds": ["recall_at_5"]}, "recommend"),
                       ({"guards": ["latency_ms_total_p95"]}, "latencies and costs are budgets now"),
                       ({"latency_tolerance_ms": 1.0}, "latency_tolerance_ms is gone.*latency_budget_ms"),
                       ({"margin": "2 percent"}, "no margin"), ({"margin": 1.5}, "no margin"),
                       ({"margin": "150%"}, "below 100%"), ({"latency_budget_ms": 0}, "latency_budget_ms")):
        with pytest.raises(ConfigError, match=match):
            load_experiment({**base, "recommend": bad})


def test_fewer_than_two_configs_no_headline_scores_or_a_latency_headline_are_refused():
    with pytest.raises(ValueError, match="at least 2 configs"):
        recommend([record("a", BASE)], HEADLINE)
    with pytest.raises(ValueError, match="no per-query scores"):
        recommend([record("a", BASE), record("b", BASE)], "doc_ndcg_at_10")
    with pytest.raises(ValueError, match="quality metric"):
        recommend([record("a", BASE), record("b", BASE)], "latency_ms_total")
    assert math.isnan(recommend([record("a", BASE), record("b", BASE)], HEADLINE).costs["a"])
