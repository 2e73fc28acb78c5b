"""Racing and stage-wise search through `kbench sweep` on the small demo sample (BM25 only: no model load):
the race drops configs with their round and p-value and ends with the grid's ranking of what is left; the
stage-wise search scores a + b configs, not a x b; both are logged as one MLflow run."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from kbench.cli import main
from kbench.config import ConfigError
from kbench.sweep import expand_sweep
from kbench.sweep.scoring import ConfigScorer
from kbench.sweep.search_run import run_search
from kbench.sweep.stagewise import stage_axes, start_point
from tests.conftest import make_config

GRID = {"chunking.chunk_size": [200, 600, 1500], "retrieval.leg_params.bm25.k1": [0.3, 1.2]}
DEMO = {"name": "demo", "max_documents": 4, "max_queries": 40, "seed": 1}


def data(workspace: Path, search: dict) -> dict:
    d = make_config(workspace, dataset=DEMO, retrieval={"legs": ["bm25"], "top_k": 10})
    d.update(name="t", sweep=GRID, search=search)
    return d


def test_race_drops_with_rounds_and_p_values_and_ranks_the_rest_over_every_question(workspace, tmp_path, capsys):
    config = tmp_path / "race.yaml"
    config.write_text(yaml.safe_dump(data(workspace, {"strategy": "race", "first": 10, "alpha": 0.2})))
    assert main(["sweep", str(config), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "race t: 6 configs" in out and "Bonferroni over" in out
    run_id = re.search(r"MLflow run (\w+)", out).group(1)
    client = MlflowClient(f"sqlite:///{workspace / 'mlflow.db'}")
    run = client.get_run(run_id)
    assert run.data.tags["kbench.sweep.search"] == "race"
    summary = json.loads(Path(client.download_artifacts(run_id, "search.json", str(tmp_path))).read_text())
    n = summary["questions"]
    dropped = {d["label"]: d for d in summary["dropped"]}
    assert dropped  # on this sample the race does drop (chunk_size 200 in round 1)
    survivors = [r["config"] for r in summary["ranking"]] or [summary["recommended"]]
    assert set(dropped) | set(survivors) == set(expand_sweep(data(workspace, {})).by_label())
    for d in dropped.values():
        assert d["p_value"] < summary["threshold"] and d["diff"] < 0 and d["questions"] <= n
        assert f"round {d['round']}: {d['label']} ({d['questions']} questions" in out
    # the recommended config's metrics are its means over every question
    assert run.data.metrics["search_scorings"] == summary["cost"]["scorings"]
    assert summary["cost"]["scorings"] <= 6 * n
    assert summary["recommended"] == run.data.tags["kbench.sweep.winner"]


def test_race_on_synthetic_scorer_equals_the_grid_ranking_of_survivors(workspace):
    """The race's closing ranking is compare_scores over the survivors' per-query results on every question:
    the same numbers a full scoring of those configs gives."""
    plan = expand_sweep(data(workspace, {"strategy": "race", "first": 10, "alpha": 0.2}))
    outcome = run_search(plan, say=lambda line: None, log=False)
    scorer = ConfigScorer(plan)
    ids = scorer.question_ids()
    try:
        full = scorer.score(list(outcome.frames), ids)
    finally:
        scorer.close()
    for label, frame in outcome.frames.items():
        assert frame[outcome.headline].to_numpy() == pytest.approx(full[label][outcome.headline].to_numpy(), abs=1e-12)
    assert len(outcome.frames[outcome.recommended]) == len(ids)


def test_stagewise_scores_a_plus_b_configs_and_states_its_assumption(workspace, tmp_path, capsys):
    search = {"strategy": "stagewise", "order": ["chunking", "retrieval"], "check": True}
    config = tmp_path / "stage.yaml"
    config.write_text(yaml.safe_dump(data(workspace, search)))
    assert main(["sweep", str(config), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "chunking: chunk_size=" in out and "retrieval: k1=" in out
    assert "assumes the stages do not interact" in out and "configs one axis away from" in out
    # 3 chunk sizes with k1 at the baseline's 1.2, then 2 k1 values (one already scored): 4 configs; the check
    # adds the neighbours not yet scored
    scored = int(re.search(r"(\d+) configs scored", out).group(1))
    assert 4 <= scored <= 6


def test_stagewise_axes_and_start():
    sweep = {"chunking.chunk_size": [200, 600], "retrieval.top_k": [5, 10], "rerank.enabled": [False, True]}
    assert stage_axes(sweep, ["retrieval", "chunking", "rerank"]) == [
        ("retrieval", ["retrieval.top_k"]), ("chunking", ["chunking.chunk_size"]), ("rerank", ["rerank.enabled"])]
    assert start_point(sweep, {"chunking": {"chunk_size": 600}, "retrieval": {"top_k": 20}}) == {
        "chunking.chunk_size": 1, "retrieval.top_k": 0, "rerank.enabled": 0}
    with pytest.raises(ValueError, match="no stage for the grid axes"):
        stage_axes(sweep, ["chunking", "retrieval"])


def test_a_bad_search_block_fails_before_anything_runs(tmp_path):
    with pytest.raises(ConfigError, match="search.alpha"):
        expand_sweep(data(tmp_path, {"strategy": "race", "alpha": 1.5}))
    with pytest.raises(ConfigError, match="search.strategy"):
        expand_sweep(data(tmp_path, {"strategy": "bandit"}))
    with pytest.raises(ConfigError, match="unknown stages"):
        expand_sweep(data(tmp_path, {"strategy": "stagewise", "order": ["chunks"]}))
