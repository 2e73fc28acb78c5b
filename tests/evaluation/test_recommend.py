"""The recommendation rule on hand-built rankings: a config in every tie, none, the cheapest inside the tie, and
the headline tie being exactly the one ``kbench compare`` ranks by."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from kbench.compare import RunScores, compare_scores
from kbench.compare.recommendation import recommend_comparison
from kbench.config import ConfigError, load_experiment
from kbench.evaluation.recommend import ConfigRecord, RecommendConfig, recommend, resolve_metrics
from kbench.evaluation.significance import holm, randomization_test

N = 40
BASE = np.random.default_rng(11).uniform(0.3, 0.7, N)


def record(label: str, ndcg, latency_ms, cost: float | None = None, **more) -> ConfigRecord:
    per_query = {"chunk_ndcg_at_10": np.asarray(ndcg, dtype=float),
                 "latency_ms_total": np.broadcast_to(np.asarray(latency_ms, dtype=float), (N,)).copy(),
                 **{k: np.asarray(v, dtype=float) for k, v in more.items()}}
    return ConfigRecord(label, per_query, {} if cost is None else {"cost_index_bytes": cost})


GUARD_LATENCY = RecommendConfig(guards=["latency_ms_total_p95"])


def test_the_one_config_in_every_tie_is_recommended():
    near = BASE + np.random.default_rng(1).normal(0, 0.05, N)  # not significantly different from BASE
    records = [record("fast-worse", BASE - 0.3, 1.0, 10),  # fast, far below on nDCG
               record("slow-best", BASE + 0.01, 5.0, 10),  # best on nDCG, slow
               record("fast-good", near, 1.0, 99)]  # tied on nDCG, as fast as the fastest
    found = recommend(records, "chunk_ndcg_at_10", GUARD_LATENCY)
    assert found.ties["chunk_ndcg_at_10"].tie == ["slow-best", "fast-good"]
    assert found.ties["latency_ms_total_p95"].tie == ["fast-worse", "fast-good"]
    assert found.in_every_tie == ["fast-good"] and found.config == "fast-good"
    assert found.lines()[0] == ("recommendation: fast-good (the only config in the top tie on every metric: "
                                "chunk_ndcg_at_10, latency_ms_total_p95)")
    assert found.tie == ["fast-good"] and found.reason == ("fast-good (the only config in the top tie on every "
                                                           "metric: chunk_ndcg_at_10, latency_ms_total_p95)")


def test_no_config_in_every_tie_says_which_metrics_disagree_and_why():
    records = [record("hybrid", BASE + 0.2, 5.0, 100), record("bm25", BASE, 0.3, 0),
               record("bm25-small", BASE - 0.01, 0.3, 0)]
    found = recommend(records, "chunk_ndcg_at_10", GUARD_LATENCY)
    assert found.config is None and found.in_every_tie == []
    assert found.ties["chunk_ndcg_at_10"].tie == ["hybrid"]
    assert found.ties["latency_ms_total_p95"].tie == ["bm25", "bm25-small"]
    assert found.conflict == "latency_ms_total_p95" and found.closest == "hybrid"
    lines = found.lines()
    assert lines[0] == ("recommendation: none: no config is in the top tie on every metric (chunk_ndcg_at_10, "
                        "latency_ms_total_p95)")
    assert lines[1] == ("  they disagree: the configs in the top tie on chunk_ndcg_at_10 (hybrid) are not in the top "
                        "tie on latency_ms_total_p95 (bm25, bm25-small): latency_ms_total_p95 5.00 ms at best "
                        "(hybrid) against 0.30 ms (bm25), beyond the 1 ms tolerance")
    assert lines[2].startswith("  closest: hybrid, in the top tie on 1 of 2 (not latency_ms_total_p95)")
    assert found.tie == [] and found.reason == (
        "none: no config is in the top tie on every metric (chunk_ndcg_at_10, latency_ms_total_p95): the configs "
        "in the top tie on chunk_ndcg_at_10 (hybrid) are not in the top tie on latency_ms_total_p95 (bm25, "
        "bm25-small): latency_ms_total_p95 5.00 ms at best (hybrid) against 0.30 ms (bm25), beyond the 1 ms "
        "tolerance")


def test_the_cheapest_config_inside_the_tie_wins_then_the_faster():
    rng = np.random.default_rng(2)
    same = [BASE + rng.normal(0, 0.005, N) for _ in range(3)]
    records = [record("a", same[0], 2.0, 300), record("b", same[1], 2.0, 100), record("c", same[2], 2.0, 200)]
    found = recommend(records, "chunk_ndcg_at_10", GUARD_LATENCY)
    assert sorted(found.in_every_tie) == ["a", "b", "c"] and found.config == "b"
    assert "the cheapest of 3 such configs: cost_index_bytes 100)" in found.lines()[0]
    # equal costs: the lower p95 latency; a cost no run logged: said, and latency decides
    records = [record("a", same[0], 2.0, 100), record("b", same[1], 2.0, 100), record("c", same[2], 1.9, 100)]
    found = recommend(records, "chunk_ndcg_at_10", RecommendConfig(guards=[]))
    assert found.config == "c" and "as low for 3 of them; then p95 latency 1.90 ms" in found.lines()[0]
    records = [record("a", same[0], 2.0), record("b", same[1], 1.5), record("c", same[2], 1.9)]
    found = recommend(records, "chunk_ndcg_at_10", RecommendConfig(guards=[]))
    assert found.config == "b"
    assert found.left_out["cost_index_bytes"].startswith("not logged by these runs")


def test_the_latency_tie_is_a_paired_bootstrap_of_the_p95_difference():
    rng = np.random.default_rng(3)
    base = rng.uniform(1.0, 2.0, N)
    records = [record("fast", BASE, base), record("noisy", BASE, base + rng.normal(0, 0.05, N)),
               record("slow", BASE, base + 1.0)]
    strict = RecommendConfig(guards=["latency_ms_total_p95"], latency_tolerance_ms=0)
    found = recommend(records, "chunk_ndcg_at_10", strict)
    tie = found.ties["latency_ms_total_p95"]
    assert tie.values == {label: pytest.approx(float(np.percentile(r.per_query["latency_ms_total"], 95)))
                          for label, r in zip(["fast", "noisy", "slow"], records)}
    assert "slow" not in tie.tie and tie.best in ("fast", "noisy") and set(tie.tie) == {"fast", "noisy"}
    # about 1 ms slower at p95: tied within a 1.5 ms tolerance; 2 ms slower: outside the default 1 ms
    assert set(recommend(records, "chunk_ndcg_at_10", strict.model_copy(update={"latency_tolerance_ms": 1.5}))
               .ties["latency_ms_total_p95"].tie) == {"fast", "noisy", "slow"}
    records[2] = record("slow", BASE, base + 2.0)
    assert "slow" not in recommend(records, "chunk_ndcg_at_10", GUARD_LATENCY).ties["latency_ms_total_p95"].tie


def test_guards_take_the_headline_level_and_unmeasured_ones_are_said():
    assert resolve_metrics("chunk_ndcg_at_10", ["doc_ndcg_at_10", "chunk_ndcg_at_10", "recall_at_10",
                                                "latency_ms_total_p95"]) == [
        "chunk_ndcg_at_10", "doc_ndcg_at_10", "chunk_recall_at_10", "latency_ms_total_p95"]
    assert resolve_metrics("doc_ndcg_at_10", ["recall_at_5"]) == ["doc_ndcg_at_10", "doc_recall_at_5"]
    records = [record("a", BASE, 1.0, 1, chunk_recall_at_10=BASE), record("b", BASE - 0.3, 1.0, 1,
                                                                          chunk_recall_at_10=BASE)]
    found = recommend(records, "chunk_ndcg_at_10", RecommendConfig())  # the default guards
    assert found.metrics == ["chunk_ndcg_at_10", "chunk_recall_at_10", "latency_ms_total_p95"]
    assert found.left_out == {"doc_ndcg_at_10": "not measured by these runs"}
    assert found.lines()[-1] == "  left out: doc_ndcg_at_10 (not measured by these runs)"
    assert found.config == "a"


def test_the_headline_tie_is_kbench_compares_ranking():
    index = pd.Index([f"q{i:02d}" for i in range(N)], name="query_id")
    rng = np.random.default_rng(4)
    runs = []
    for label, shift in (("base", 0.0), ("close", 0.025), ("far", -0.2), ("up", 0.03)):
        frame = pd.DataFrame({"chunk_ndcg_at_10": np.clip(BASE + shift + rng.normal(0, 0.05, N), 0, 1),
                              "latency_ms_total": np.full(N, 1.0)}, index=index)
        runs.append(RunScores(label, f"id-{label}", frame, f"id-{label}", "baseline" if label == "base" else "",
                              {"cost_index_bytes": 1.0}))
    cmp = compare_scores(runs, metrics=["chunk_ndcg_at_10"])
    ranking = cmp.ranking()
    found = recommend_comparison(cmp, RecommendConfig(guards=[]))
    assert found.ties["chunk_ndcg_at_10"].tie == list(ranking[ranking["vs_best"] != "worse"]["config"])
    best = ranking.iloc[0]["config"]
    others = list(ranking["config"].iloc[1:])
    p = [randomization_test(cmp.scores(best, "chunk_ndcg_at_10"), cmp.scores(o, "chunk_ndcg_at_10")).p_value
         for o in others]
    assert found.ties["chunk_ndcg_at_10"].tie == [best] + [o for o, q in zip(others, holm(p)) if q >= 0.05]
    assert found.ties["chunk_ndcg_at_10"].tie == ["up", "close"]  # one tied, two significantly worse


def test_the_recommend_section_is_checked_and_changes_no_run_key(tmp_path):
    base = {"dataset": {"name": "demo"}, "workspace": str(tmp_path)}
    plain = load_experiment(base)
    guarded = load_experiment({**base, "recommend": {"guards": ["recall_at_5"], "cost": "cost_embed_seconds"}})
    assert guarded.recommend.guards == ["recall_at_5"] and plain.recommend.guards[0] == "doc_ndcg_at_10"
    assert guarded.run_key() == plain.run_key()
    with pytest.raises(ConfigError, match="recommend.guards"):
        load_experiment({**base, "recommend": {"guards": ["nDCG@10"]}})
    with pytest.raises(ConfigError, match="recommend"):
        load_experiment({**base, "recommend": {"gaurds": ["recall_at_5"]}})


def test_fewer_than_two_configs_or_no_headline_scores_are_refused():
    with pytest.raises(ValueError, match="at least 2 configs"):
        recommend([record("a", BASE, 1.0)], "chunk_ndcg_at_10")
    with pytest.raises(ValueError, match="no per-query scores"):
        recommend([record("a", BASE, 1.0), record("b", BASE, 1.0)], "doc_ndcg_at_10")
    assert math.isnan(recommend([record("a", BASE, 1.0), record("b", BASE, 1.0)],
                                "chunk_ndcg_at_10").costs["a"])
