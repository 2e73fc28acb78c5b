"""Every setting that names another thing is checked against what the runs can produce, before anything runs.

issue 52: ``recommend.latency_stage=totl`` turned a latency budget off in silence (``p95_latency`` returned 0.0 for
a stage no run timed, and the setting was checked against a name pattern only). Each setting that names a stage,
a metric, a cost or a metadata field is refused, with the names allowed, at the first moment they are known: the
config's load (stages, and metrics from the evaluation section), a sweep's expansion (the stages its configs time),
the records a recommendation reads, the dataset once read (slices), a gate's config sides before they run.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from kbench.config import ConfigError, load_experiment
from kbench.evaluation.recommend import ConfigRecord, RecommendConfig, recommend
from kbench.paths import REPO_ROOT
from kbench.sweep.expand import expand_sweep
from tests.reliability.inputs import assert_nothing_written, config, error_lines, run_kbench, write_yaml

BASE = {"dataset": {"name": "demo"}}
HEADLINE = "chunk_ndcg_at_10"


def refused(recommend_section: dict, **sections) -> str:
    with pytest.raises(ConfigError) as info:
        load_experiment({**BASE, **sections, "recommend": recommend_section})
    return str(info.value)


@pytest.mark.parametrize("stage, words", [
    ("totl", "recommend.latency_stage: 'totl' is no stage a search times; allowed: total, embed_query, leg_<leg>"),
    ("leg_vectr", "recommend.latency_stage: 'leg_vectr' names no leg (legs: bm25, code_examples, pg_hybrid, "
                  "postgres_fts, vector)"),
])
def test_latency_stage_names_a_stage_a_search_times(stage, words):
    assert words in refused({"latency_stage": stage, "latency_budget_ms": 0.2})
    for known in ("total", "embed_query", "leg_bm25", "fusion", "rerank", "grouping"):
        load_experiment({**BASE, "recommend": {"latency_stage": known}})


def test_latency_stage_of_a_sweep_is_one_some_config_has():
    """A stage every config lacks counts 0 ms in each, so the budget would pass them all: refused at expansion."""
    sweep = {**config("/tmp/unused", {"name": "demo"}), "sweep": {"chunking.chunk_size": [300, 600]},
             "recommend": {"latency_budget_ms": 5, "latency_stage": "rerank"}}
    with pytest.raises(ConfigError, match="no config here has the stage 'rerank', so the 5 ms budget would hold "
                                          "nothing; these configs time total, leg_bm25, fusion"):
        expand_sweep(sweep)
    sweep["recommend"]["latency_stage"] = "leg_bm25"
    assert len(expand_sweep(sweep).configs) == 2
    sweep["recommend"] = {"latency_stage": "rerank"}  # no budget: the stage holds nothing and is not checked
    assert len(expand_sweep(sweep).configs) == 2


def test_the_misspelt_stage_of_the_issue_is_refused_before_the_sweep_starts(tmp_path):
    """The case of the issue: `kbench sweep ... --set recommend.latency_budget_ms=0.2 --set
    recommend.latency_stage=totl` recommended chunk_size=1200 with no exclusion and no word."""
    workspace = tmp_path / "ws"
    path = write_yaml(tmp_path / "sweep.yaml", {**config(workspace, {"name": "demo"}),
                                                "sweep": {"chunking.chunk_size": [300, 600]}})
    done = run_kbench("sweep", str(path), "--set", "recommend.latency_budget_ms=0.2", "--set",
                      "recommend.latency_stage=totl", cwd=tmp_path)
    assert done.code == 2 and "Traceback" not in done.err, done.err[-2000:]
    assert "recommend.latency_stage: 'totl' is no stage a search times" in done.err
    assert_nothing_written(workspace)


@pytest.mark.parametrize("guards, evaluation", [(["chunk_ndcg_at_11"], {}), (["recall_at_10"], {"k": [1, 5]}),
                                                (["doc_recall_at_budget_500"], {"budgets": [100]})])
def test_a_guard_names_a_metric_the_evaluation_section_scores(guards, evaluation):
    message = refused({"guards": guards}, evaluation=evaluation)
    assert f"recommend.guards: {guards[0]}: no run of this config measures it" in message
    assert "give per-query metrics these runs log: {doc,chunk}_{precision,recall,mrr,ndcg,map,hit_rate}_at_{" in message


def test_guards_that_are_scored_and_the_defaults_are_accepted():
    load_experiment({**BASE, "recommend": {"guards": ["recall_at_5", "span_iou_at_10", "doc_ndcg_at_10"]}})
    load_experiment({**BASE, "evaluation": {"budgets": [100]}, "recommend": {"guards": ["span_recall_at_budget_100"]}})
    load_experiment({**BASE, "evaluation": {"metrics": ["nDCG@10", "P(rel=2)@5"]},
                     "recommend": {"guards": ["precision_at_5_rel_2"]}})
    # the defaults name nDCG@10 and recall@10: a section without k 10 leaves them out, and the lines say so
    load_experiment({**BASE, "evaluation": {"k": [1, 5]}})


@pytest.mark.parametrize("cost, words", [
    ("cost_indx_bytes", "'cost_indx_bytes' is no cost a run logs; give one of cost_index_bytes, cost_embed_seconds"),
    ("chunk_ndcg_at_10", "'chunk_ndcg_at_10' is a quality (higher is better), not a cost"),
    ("llm_total_cost_usd", "'llm_total_cost_usd': this config asks no LLM, so no run logs it"),
    ("latency_ms_total", "'latency_ms_total' is no run metric; a latency cost is a percentile of a stage"),
    ("latency_ms_totl_p95", "latency_ms_totl_p95: 'totl' is no stage a search times"),
    ("time_s_serch", "'time_s_serch' is no stage a run times"),
])
def test_a_cost_names_a_cost_a_run_logs(cost, words):
    assert f"recommend.cost: {words}" in refused({"cost": cost})


def test_costs_a_run_logs_are_accepted():
    for cost in ("cost_embed_seconds", "latency_ms_total_p95", "latency_ms_leg_vector_p50", "time_s_embed"):
        load_experiment({**BASE, "recommend": {"cost": cost}})


def record(label: str, shift: float, **columns) -> ConfigRecord:
    base = np.random.default_rng(5).uniform(0.3, 0.7, 40)
    per_query = {HEADLINE: base + shift, "latency_ms_total": np.full(40, 1.0), **columns}
    return ConfigRecord(label, per_query, {"cost_index_bytes": 1000.0})


def test_the_recommendation_refuses_what_none_of_its_records_measures():
    """``kbench compare`` builds the section from flags; the records are the first place the names are known."""
    records = [record("a", 0.0), record("b", -0.1)]
    for section, words in (({"guards": ["recall_at_10"]}, "recommend.guards: recall_at_10: no config here is scored "
                                                          f"on it; these runs score {HEADLINE}"),
                           ({"cost": "cost_embed_seconds"}, "recommend.cost: no config here logged "
                                                            "cost_embed_seconds; these runs log cost_index_bytes"),
                           ({"latency_budget_ms": 5, "latency_stage": "rerank"},
                            "recommend.latency_stage: no config here has the stage 'rerank'")):
        with pytest.raises(ConfigError, match=words):
            recommend(records, HEADLINE, RecommendConfig(**section))
    # the defaults the records lack are left out, and said
    found = recommend(records, HEADLINE, RecommendConfig())
    assert found.config == "a" and "doc_ndcg_at_10 (not measured by these runs)" in found.lines()[-1]


def test_a_config_without_the_budgets_stage_counts_0_ms_and_the_lines_say_so():
    records = [record("reranked", 0.0, latency_ms_rerank=np.full(40, 9.0)), record("plain", -0.1)]
    found = recommend(records, HEADLINE, RecommendConfig(guards=[], latency_budget_ms=5, latency_stage="rerank"))
    assert found.latency == {"reranked": 9.0, "plain": 0.0} and found.config == "plain"
    assert "  no rerank stage in plain: 0 ms of it counted against the latency budget" in found.lines()
    assert found.excluded == {"reranked": "p95 9.00 ms over the 5 ms budget"}
    unmeasured = [ConfigRecord("x", {HEADLINE: np.ones(3)}), ConfigRecord("y", {HEADLINE: np.ones(3)})]
    found = recommend(unmeasured, HEADLINE, RecommendConfig(guards=[], latency_budget_ms=5, latency_stage="rerank"))
    assert math.isnan(found.latency["x"]) and found.config is None  # nothing timed at all: excluded, and said


def test_a_slice_names_a_metadata_field_the_dataset_has(tmp_path):
    """A query.<field> no question carries put every question in one slice, 'missing': refused once the dataset is
    read, before any index is built."""
    workspace = tmp_path / "ws"
    path = write_yaml(tmp_path / "run.yaml", config(workspace, {"name": "demo", "max_queries": 3},
                                                    evaluation={"k": [1, 5], "slices": ["query.difficulty"]},
                                                    tracking={"enabled": False}))
    done = run_kbench("run", str(path), "--quiet", cwd=tmp_path)
    assert done.code == 2 and "Traceback" not in done.err, done.err[-2000:]
    (line,) = error_lines(done.err)
    assert line == ("kbench: error: evaluation.slices: query.difficulty: no question of dataset demo has the metadata "
                    "field 'difficulty', so every question would fall in one slice; its questions' fields: none")
    assert not (workspace / "cache").exists() and not (workspace / "runs").exists()


def test_a_gate_metric_its_config_sides_would_not_score_is_refused_before_they_run(tmp_path):
    workspace = tmp_path / "ws"
    sides = [write_yaml(tmp_path / f"{name}.yaml", config(workspace, {"name": "demo"}, name=name))
             for name in ("baseline", "candidate")]
    done = run_kbench("gate", *map(str, sides), "--metric", "chunk_ndcg_at_11", cwd=tmp_path)
    assert done.code == 2 and "Traceback" not in done.err, done.err[-2000:]
    (line,) = error_lines(done.err)
    assert line.startswith(f"kbench: error: --metric chunk_ndcg_at_11: a run of {sides[0]} scores no such per-query "
                           "metric; it scores {doc,chunk}_")
    assert_nothing_written(workspace)


def test_metric_columns_are_the_columns_a_run_scores(tmp_path):
    """``EvaluationConfig.metric_columns`` (what guards and gate metrics are checked against) holds every quality
    column a real run of the demo span set scores, budgets and the retrieval trace's ceilings included, and no
    other."""
    from kbench.pipeline import run_pipeline

    experiment = load_experiment(config(tmp_path / "ws", {"name": "demo", "max_queries": 8},
                                        evaluation={"k": [1, 5], "budgets": [200]}, tracking={"enabled": False}))
    done = run_pipeline(experiment, progress=False)
    scored = {c for c in done.per_query.select_dtypes("number").columns
              if not c.startswith("latency_ms_") and c != "n_results"}
    assert scored == set(experiment.evaluation.metric_columns())
    assert {f"latency_ms_{s}" for s in experiment.latency_stages()} == {
        c for c in done.per_query.columns if c.startswith("latency_ms_")}


def test_every_timed_stage_is_a_cost_recommend_accepts():
    """TIMED_STAGES (what ``time_s_<stage>`` may name) holds every stage a StageTimer in kbench times by name."""
    import re

    from kbench.evaluation.config import TIMED_STAGES

    named = set()
    for path in (REPO_ROOT / "kbench").rglob("*.py"):
        named |= set(re.findall(r"timer\.stage\(\"(\w+)\"", path.read_text(encoding="utf-8")))
    assert named and named <= set(TIMED_STAGES), sorted(named - set(TIMED_STAGES))

