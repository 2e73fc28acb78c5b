"""Sweeps: grid/variant expansion, MLflow parent/child runs, failures, resume after kill -9, reuse by run
key, and the Dask executor giving the local executor's metrics, on small real demo samples."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from kbench.cli import main
from kbench.compare import compare_runs
from kbench.compare.recommendation import recommend_comparison
from kbench.config import ConfigError, RecommendConfig, load_experiment
from kbench.sweep import expand_sweep, load_sweep, make_executor, run_sweep
from kbench.embedding.models import resolve_model_path
from kbench.sweep.run import SweepError, SweepLock
from kbench.sweep.summary import summary_lines
from kbench.tracking.tags import SWEEP_CONFIG_KEY as CONFIG_KEY
from kbench.tracking.tags import SWEEP_LABEL as LABEL
from kbench.tracking.tags import SWEEP_REUSED_FROM as REUSED_FROM
from kbench.tracking.tags import SWEEP_ROLE as ROLE
from tests.conftest import make_config

KBENCH = Path(sys.executable).parent / "kbench"
REPO = Path(__file__).resolve().parents[2]
SMALL_DEMO = {"name": "demo", "max_documents": 1, "max_queries": 6, "seed": 2}  # 5 documents, 28 kB


def sweep_data(workspace: Path, sweep=None, variants=None, **sections) -> dict:
    sections.setdefault("retrieval", {"legs": ["vector"], "top_k": 20, "latency": "batch"})
    data = make_config(workspace, dataset=SMALL_DEMO, **sections)
    data["name"] = "t"
    if sweep:
        data["sweep"] = sweep
    if variants:
        data["variants"] = variants
    return data


def runs_of(workspace: Path, experiment: str = "tests"):
    client = MlflowClient(f"sqlite:///{workspace / 'mlflow.db'}")
    exp = client.get_experiment_by_name(experiment)
    return client, (client.search_runs([exp.experiment_id], max_results=1000) if exp else [])


# --------------------------------------------------------------------------- expansion
def test_grid_expands_every_combination_with_knob_labels(tmp_path):
    plan = expand_sweep(sweep_data(tmp_path, sweep={"chunking.chunk_size": [300, 600, 900],
                                                    "retrieval.top_k": [5, 20]}))
    assert len(plan.configs) == 6
    labels = [c.label for c in plan.configs]
    assert labels[0] == "chunk_size=300,top_k=5"
    by = plan.by_label()
    assert by["chunk_size=600,top_k=20"].knobs == {}  # equals the baseline
    assert by["chunk_size=300,top_k=20"].knobs == {"chunking.chunk_size": "300"}
    assert by["chunk_size=900,top_k=5"].knobs == {"chunking.chunk_size": "900", "retrieval.top_k": "5"}
    assert len({c.run_key for c in plan.configs}) == 6
    assert by["chunk_size=300,top_k=5"].experiment.chunking.chunk_size == 300


def test_run_key_ignores_names_and_tracking(tmp_path):
    a = expand_sweep(sweep_data(tmp_path, sweep={"retrieval.top_k": [5]}))
    b = expand_sweep({**sweep_data(tmp_path / "other", sweep={"retrieval.top_k": [5]}),
                      "name": "renamed", "tracking": {"experiment": "x"}})
    assert a.configs[0].run_key == b.configs[0].run_key


def test_variant_switching_strategy_drops_the_old_strategys_knobs(tmp_path):
    plan = expand_sweep(sweep_data(tmp_path, variants=[{"name": "whole", "chunking": {"strategy": "none"}}],
                                   sweep={"chunking.chunk_size": [400]}))
    whole = plan.by_label()["whole"]
    assert whole.experiment.chunking.strategy == "none"
    assert "chunk_size" not in whole.experiment.resolved()["chunking"]
    assert whole.knobs["chunking.strategy"] == "none"


def test_strategy_grid_collapses_configs_that_resolve_equal(tmp_path):
    plan = expand_sweep(sweep_data(tmp_path, sweep={"chunking.strategy": ["fixed", "none"],
                                                    "chunking.chunk_size": [300, 600]}))
    # none ignores chunk_size: its two grid points are one config
    assert len(plan.configs) == 3
    none = [c for c in plan.configs if c.experiment.chunking.strategy == "none"][0]
    assert none.aliases == ["strategy=none,chunk_size=600"]


def test_bad_sweeps_fail_before_anything_runs(tmp_path):
    with pytest.raises(ConfigError, match="chunk_sise"):
        expand_sweep(sweep_data(tmp_path, sweep={"chunking.chunk_sise": [300]}))
    with pytest.raises(ConfigError, match="non-empty list"):
        expand_sweep(sweep_data(tmp_path, sweep={"retrieval.top_k": 5}))
    with pytest.raises(ConfigError, match="nothing to sweep"):
        expand_sweep(sweep_data(tmp_path))
    with pytest.raises(ConfigError, match="distinct name"):
        expand_sweep(sweep_data(tmp_path, variants=[{"name": "a", "retrieval.top_k": 3},
                                                    {"name": "a", "retrieval.top_k": 4}]))
    with pytest.raises(ConfigError, match=r"(?s)\[top_k=0\].*retrieval.top_k"):
        expand_sweep(sweep_data(tmp_path, sweep={"retrieval.top_k": [5, 0]}))


def test_a_model_axis_picks_each_models_provider_and_backend_or_refuses_a_written_one(tmp_path, capsys):
    """issue 42 item 8: all-MiniLM-L6-v2, paraphrase-MiniLM-L3-v2 (no torch weights) and wordllama (static) in one
    grid. Unwritten, the provider and backend are the ones each model needs, shown in the dry run's table; written
    wrong, every such config is refused when the sweep loads, one line each, before any work."""
    models = ["all-MiniLM-L6-v2", "paraphrase-MiniLM-L3-v2", "wordllama-l2-supercat"]
    data = sweep_data(tmp_path, sweep={"embedding.model": models})
    plan = expand_sweep(data)
    chosen = {c.experiment.embedding.model: (c.experiment.embedding.provider, c.experiment.embedding.backend)
              for c in plan.configs}
    assert chosen == {"all-MiniLM-L6-v2": ("sentence_transformers", "exact"),  # each chosen among its own backends
                      "paraphrase-MiniLM-L3-v2": ("sentence_transformers", "exact"),
                      "wordllama-l2-supercat": ("static", "exact")}
    config = tmp_path / "models.yaml"
    config.write_text(yaml.safe_dump(data))
    assert main(["sweep", str(config), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "provider" in out and "static" in out  # backend: exact for each, chosen at run time among its own

    data["embedding"] = {"model": "all-MiniLM-L6-v2", "provider": "sentence_transformers", "backend": "torch"}
    config.write_text(yaml.safe_dump(data))
    with pytest.raises(SystemExit) as stopped:
        main(["sweep", str(config), "--dry-run"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "[model=paraphrase-MiniLM-L3-v2]" in err and "runs on onnx, openvino, not torch" in err
    assert "[model=wordllama-l2-supercat]" in err and "set embedding.provider=static" in err
    assert "[model=all-MiniLM-L6-v2]" not in err


def test_a_config_that_cannot_start_stops_the_sweep_and_its_dry_run(workspace, capsys):
    """A missing model is found by every config's start-time checks, in --dry-run and before the parent run."""
    data = sweep_data(workspace, sweep={"retrieval.top_k": [10, 20]},
                      variants=[{"name": "broken", "embedding.model": "/nonexistent/model-folder"}])
    with pytest.raises(SweepError, match=r"1 of 3 configs cannot start.*\n  \[broken\] unknown model"):
        run_sweep(expand_sweep(data), make_executor("local"), say=lambda s: None)
    assert not (workspace / "mlflow.db").exists()  # nothing ran, no parent run
    config = workspace / "broken.yaml"
    config.write_text(yaml.safe_dump(data))
    assert main(["sweep", str(config), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("  [broken] unknown model '/nonexistent/model-folder'") and len(err) == 2


def test_a_link_child_shows_its_sources_real_start_and_end(tmp_path, monkeypatch):
    """issue 42 item 3: a config reused from another run took that run's time, not the moment of linking."""
    from kbench.sweep.run import _link_child, _log_parent_plan
    from kbench.tracking.mlflow_run import ensure_experiment

    monkeypatch.setenv("KBENCH_WORKSPACE", str(tmp_path / "used"))
    plan = expand_sweep(sweep_data(tmp_path / "configured", sweep={"retrieval.top_k": [10, 20]}))
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment_id = ensure_experiment(client, "t", tmp_path)
    source = client.create_run(experiment_id, start_time=1_700_000_000_000).info.run_id
    client.log_metric(source, "chunk_ndcg_at_10", 0.5)
    client.set_tag(source, "kbench.language.documents", "fr 96% (119), en 4% (5)")
    client.set_terminated(source, "FINISHED", end_time=1_700_000_026_000)  # 26 s
    parent = client.create_run(experiment_id).info.run_id
    link = client.get_run(_link_child(client, experiment_id, parent, plan, plan.configs[0], client.get_run(source)))
    assert (link.info.start_time, link.info.end_time) == (1_700_000_000_000, 1_700_000_026_000)
    assert link.data.tags["kbench.language.documents"] == "fr 96% (119), en 4% (5)"  # what the source ran on
    _log_parent_plan(client, parent, plan)  # issue 42 item 5: the parent names the workspace actually used
    assert client.get_run(parent).data.params["workspace"] == str((tmp_path / "used").resolve())


def test_a_sweep_of_variants_only_runs_its_baseline_first(tmp_path):
    plan = expand_sweep(sweep_data(tmp_path, variants=[{"name": "small", "chunking.chunk_size": 300},
                                                       {"name": "same", "chunking.chunk_size": 600}]))
    assert [c.label for c in plan.configs] == ["baseline", "small"]
    base = plan.configs[0]
    assert base.knobs == {} and base.run_key == plan.baseline.run_key()
    assert base.aliases == ["same"]  # a variant equal to the baseline is the baseline
    with pytest.raises(ConfigError, match="distinct name"):
        expand_sweep(sweep_data(tmp_path, variants=[{"name": "baseline", "retrieval.top_k": 3}]))
    # a grid runs only its points: its baseline is not added
    grid = expand_sweep(sweep_data(tmp_path, sweep={"chunking.chunk_size": [300]}, variants=[{"name": "v",
                                                                                              "retrieval.top_k": 10}]))
    assert [c.label for c in grid.configs] == ["chunk_size=300", "v"]
    assert grid.notes == ["the baseline (this config without its sweep blocks) is no point of the grid, so it does "
                          "not run; comparisons take the first config, chunk_size=300, as baseline (add the "
                          "baseline's value to a grid axis to run it)"]
    assert plan.notes == []
    assert expand_sweep(sweep_data(tmp_path, sweep={"chunking.chunk_size": [300, 600]})).notes == []


def test_list_values_read_plainly_in_labels(tmp_path):
    plan = expand_sweep(sweep_data(tmp_path, sweep={"retrieval.legs": [["vector"], ["vector", "bm25"]]},
                                   retrieval={"legs": ["vector"], "fusion": {"strategy": "rrf"}, "top_k": 20,
                                              "latency": "batch"}))
    assert [c.label for c in plan.configs] == ["legs=[vector]", "legs=[vector,bm25]"]
    assert plan.by_label()["legs=[vector,bm25]"].experiment.retrieval.legs == ["vector", "bm25"]


def test_a_grid_cutting_top_k_below_an_evaluated_k_warns(tmp_path, capsys):
    plan = expand_sweep(sweep_data(tmp_path, sweep={"retrieval.top_k": [3, 5, 20]}))  # evaluation.k [1, 5, 10]
    assert len(plan.warnings) == 2
    three, five = plan.warnings
    assert "retrieval.top_k 3 is below evaluation.k [5, 10]" in three and "@5, @10" in three
    assert "top_k=3" in three and "lose to top_k 20 by construction" in three
    assert "retrieval.top_k 5 is below evaluation.k [10]" in five and "top_k=5" in five
    # every config keeps at least the largest k, or all keep the same number: nothing loses by construction
    assert expand_sweep(sweep_data(tmp_path, sweep={"retrieval.top_k": [10, 20]})).warnings == []
    assert expand_sweep(sweep_data(tmp_path, sweep={"chunking.chunk_size": [300, 600]},
                                   retrieval={"legs": ["vector"], "top_k": 5})).warnings == []
    # kbench sweep --dry-run says it
    config = tmp_path / "sweep.yaml"
    config.write_text(yaml.safe_dump(sweep_data(tmp_path, sweep={"retrieval.top_k": [5, 20]})))
    assert main(["sweep", str(config), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "warning: retrieval.top_k 5 is below evaluation.k [10]" in out


def test_the_demo_sweep_compares_configs_on_equal_terms():
    plan = load_sweep(REPO / "configs" / "sweeps" / "demo.yaml")
    assert plan.warnings == []
    assert len(plan.configs) == 12
    for config in plan.configs:  # every config keeps at least as many results as the largest evaluated k
        assert config.experiment.retrieval.top_k >= max(config.experiment.evaluation.k), config.label


def test_lock_refuses_a_second_driver(tmp_path):
    with SweepLock(tmp_path / "s.lock"):
        with pytest.raises(SweepError, match="already running"):
            with SweepLock(tmp_path / "s.lock"):
                pass
    with SweepLock(tmp_path / "s.lock"):  # released on exit
        pass


# --------------------------------------------------------------------------- running
@pytest.mark.slow
def test_local_sweep_logs_parent_children_failure_and_resumes(workspace):
    # fails only once its model loads (a folder's width is not known before): the start-time checks pass it
    minilm = str(resolve_model_path("all-MiniLM-L6-v2"))
    data = sweep_data(workspace, sweep={"retrieval.top_k": [3, 10]},
                      variants=[{"name": "broken", "embedding.model": minilm, "embedding.dimension": 4096}])
    plan = expand_sweep(data)
    said: list[str] = []
    out = run_sweep(plan, make_executor("local"), say=said.append)
    assert out.status == {"top_k=3": "ran", "top_k=10": "ran", "broken": "failed"}
    started = [line.split("]")[0].strip() + "]" for line in said if ": started (" in line]
    assert started == ["[1/3]", "[2/3]", "[3/3]"]  # each config announced before its stages run
    assert "ConfigError" in out.errors["broken"] and "4096" in out.errors["broken"]
    # a config failed: the others are ranked, none is recommended, no winner.yaml (issue 42 item 8)
    assert out.winner is None and out.winner_config is None and out.comparison is not None
    summary = "\n".join(summary_lines(plan, out))
    assert "no recommendation: 1 of 3 configs failed" in summary and "\nrecommendation:" not in summary
    assert "wins" not in summary and "only config" not in summary

    client, runs = runs_of(workspace)
    parent = client.get_run(out.parent_run_id)
    assert parent.data.tags[ROLE] == "parent" and parent.info.status == "FAILED"  # one config failed
    children = {r.data.tags[LABEL]: r for r in runs if r.data.tags.get("mlflow.parentRunId") == out.parent_run_id}
    assert children["top_k=3"].info.status == "FINISHED"
    assert children["top_k=3"].data.tags["mlflow.runName"] == "top_k=3"  # named by the knobs that differ
    child = children["top_k=3"]  # its real start and end: at least the stages' time, not the moment of logging
    stage_seconds = sum(v for k, v in child.data.metrics.items() if k.startswith("time_s_"))
    assert child.info.end_time - child.info.start_time >= 1000 * stage_seconds * 0.99 > 0
    assert child.data.params["workspace"] == str(Path(workspace).resolve())
    assert "per_query_results.json" in [a.path for a in client.list_artifacts(child.info.run_id)]
    assert children["top_k=3"].data.tags["kbench.knob.retrieval.top_k"] == "3"
    # the pipeline's own tags reach a child as they reach a single run's (the demo set is English)
    assert children["top_k=3"].data.tags["kbench.language.documents"].startswith("en 100%")
    assert children["top_k=3"].data.tags["kbench.language.questions"].startswith("en ")
    assert children["top_k=3"].data.metrics["chunk_recall_at_10"] <= children["top_k=10"].data.metrics[
        "chunk_recall_at_10"]
    failed = children["broken"]
    assert failed.info.status == "FAILED" and "4096" in failed.data.tags["kbench.error"]
    assert parent.data.tags["kbench.sweep.winner"] == "none"
    # issue 42 item 1: the parent says which set (name and digest) and which search; the set is its dataset input
    # (the runs list's Dataset column) and an MLflow evaluation dataset (the Datasets view)
    (given,) = parent.inputs.dataset_inputs
    assert given.dataset.name.startswith("demo") and given.dataset.digest == children["top_k=3"].inputs.dataset_inputs[
        0].dataset.digest
    label = f"{given.dataset.name}@{given.dataset.digest[:8]}"
    assert parent.info.run_name == f"t · grid of 3 configs · {label}"
    from mlflow.genai.datasets import search_datasets
    from kbench.datasets.mlflow_questions import fluent_tracking_uri
    with fluent_tracking_uri(str(client.tracking_uri)):
        assert [d.name for d in search_datasets(filter_string=f"name = '{label}'")] == [label]
    assert "error.txt" in [a.path for a in client.list_artifacts(failed.info.run_id)]
    assert "per_query.parquet" in [a.path for a in client.list_artifacts(children["top_k=3"].info.run_id)]
    report = [a.path for a in client.list_artifacts(out.parent_run_id, "report")]
    assert "report/report.md" in report and "report/metric_per_config.png" in report

    again = run_sweep(expand_sweep(data), make_executor("local"), say=lambda s: None)
    assert again.parent_run_id == out.parent_run_id
    assert again.status == {"top_k=3": "done", "top_k=10": "done", "broken": "failed"}  # failures are retried
    _, runs = runs_of(workspace)
    per_key = Counter(r.data.tags.get(CONFIG_KEY) for r in runs if r.info.status == "FINISHED"
                      and r.data.tags.get(ROLE) == "child")
    assert sorted(per_key.values()) == [1, 1]

    # another sweep holding one equal config reuses (links) its finished run instead of computing it again
    other = sweep_data(workspace, sweep={"retrieval.top_k": [10, 20]})
    third = run_sweep(expand_sweep(other), make_executor("local"), say=lambda s: None)
    assert third.status == {"top_k=10": "reused", "top_k=20": "ran"}
    link = client.get_run(third.run_ids["top_k=10"])
    assert link.data.tags[REUSED_FROM] == out.run_ids["top_k=10"]
    assert link.inputs.dataset_inputs[0].dataset.digest == given.dataset.digest  # its Dataset column too
    assert client.get_run(third.parent_run_id).info.run_name == f"t · grid of 2 configs · {label}"
    assert link.data.metrics["chunk_ndcg_at_10"] == children["top_k=10"].data.metrics["chunk_ndcg_at_10"]
    assert third.report_dir is not None and (third.report_dir / "report.html").is_file()


def _finished_children(workspace: Path) -> list:
    return [r for r in runs_of(workspace)[1] if r.data.tags.get(ROLE) == "child" and r.info.status == "FINISHED"]


def _count_finished_children_read_only(workspace: Path) -> int:
    """Poll the store while the sweep writes it. An MlflowClient would run MLflow's schema migrations on a
    store the sweep is still creating, and two processes migrating one sqlite file break each other, so
    this reads the tables directly, read-only, and counts 0 until they exist."""
    import sqlite3

    db = workspace / "mlflow.db"
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=1) as con:
            (n,) = con.execute(
                "SELECT count(*) FROM runs r JOIN tags t ON t.run_uuid = r.run_uuid "
                "WHERE t.key = ? AND t.value = 'child' AND r.status = 'FINISHED'", (ROLE,)).fetchone()
        return int(n)
    except sqlite3.Error:  # tables not created yet, or locked for a moment
        return 0


@pytest.mark.slow  # two real `kbench sweep` processes
def test_kill_minus_9_then_resume_runs_only_missing_configs(tmp_path):
    """A real `kbench sweep` process is killed with SIGKILL after its first config finished; the next start
    finishes the rest and no finished config is computed or logged twice.

    It embeds with wordllama-l2-supercat (a real static model, no torch: tests/reliability/test_kill_resume.py
    says why the model does not matter to a kill and a resume), so each start pays kbench's imports and MLflow, not
    torch's and MiniLM's (42 s in a clean-clone run with MiniLM). A config then takes about a second, most of it
    MLflow logging: four configs and a store polled every 50 ms leave the kill a window of several of them."""
    ws = tmp_path / "ws"  # own empty cache: every config embeds and is logged anew
    data = sweep_data(ws, sweep={"chunking.chunk_size": [250, 350, 450, 550], "chunking.chunk_overlap": [0]},
                      embedding={"model": "wordllama-l2-supercat", "provider": "static"})
    config = tmp_path / "sweep.yaml"
    config.write_text(yaml.safe_dump(data))
    env = {**os.environ, "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}
    stderr_file = tmp_path / "sweep.stderr"
    proc = subprocess.Popen([str(KBENCH), "sweep", str(config), "--no-report"], env=env,
                            stdout=subprocess.DEVNULL, stderr=stderr_file.open("w"), start_new_session=True)
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None and not _count_finished_children_read_only(ws):
        time.sleep(0.05)
    assert proc.poll() is None, f"the sweep ended before it could be killed:\n{stderr_file.read_text()[-3000:]}"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = {r.data.tags[CONFIG_KEY]: r.info.run_id for r in _finished_children(ws)}
    assert 1 <= len(before) < 4, "the kill should land after the first config and before the last"

    done = subprocess.run([str(KBENCH), "sweep", str(config), "--no-report"], env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    assert f"{len(before)} finished before" in done.stdout

    _, runs = runs_of(ws)
    children = [r for r in runs if r.data.tags.get(ROLE) == "child"]
    finished = Counter(r.data.tags[CONFIG_KEY] for r in children if r.info.status == "FINISHED")
    assert len(finished) == 4 and set(finished.values()) == {1}  # every config FINISHED exactly once
    computed = Counter(r.data.tags["kbench.run_key"] for r in runs if "kbench.run_key" in r.data.tags)
    for key, run_id in before.items():  # finished before the kill: never run or logged again
        assert computed[key] == 1
        assert [r.info.run_id for r in children if r.data.tags[CONFIG_KEY] == key] == [run_id]
    statuses = Counter(r.info.status for r in children)
    assert set(statuses) <= {"FINISHED", "KILLED"}  # a child caught mid-logging is marked KILLED, then re-run


def _quality(metrics: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in metrics.items() if k.startswith(("doc_", "chunk_", "span_"))}


@pytest.mark.slow  # a Dask LocalCluster: two worker processes, each importing kbench
def test_dask_local_cluster_gives_the_local_executors_metrics(tmp_path, shared_cache_workspace):
    """Both executors embed with wordllama-l2-supercat (a real static model, no torch): whether a config runs in this
    process or on a Dask worker does not depend on the model, and with MiniLM each worker imported torch and loaded
    the model (34 s in a clean-clone run; alone at load 6, 100 s and 44 CPU seconds against 40 s and 16)."""
    cache = shared_cache_workspace / "cache"
    cache.mkdir(exist_ok=True)
    results = {}
    for executor in ("local", "dask"):
        ws = tmp_path / executor
        ws.mkdir()
        (ws / "cache").symlink_to(cache, target_is_directory=True)  # workers share one cache
        data = sweep_data(ws, sweep={"chunking.chunk_size": [500, 700]},  # two embeddings, one per worker
                          embedding={"model": "wordllama-l2-supercat", "provider": "static"})
        out = run_sweep(expand_sweep(data), make_executor(executor, workers=2), report=False, say=lambda s: None)
        assert set(out.status.values()) == {"ran"}
        client, runs = runs_of(ws)
        results[executor] = {r.data.tags[LABEL]: r for r in runs if r.data.tags.get(ROLE) == "child"}
    assert set(results["local"]) == set(results["dask"]) and len(results["local"]) == 2
    for label, run in results["local"].items():
        other = results["dask"][label]
        assert other.data.tags["kbench.sweep.executor"] == "dask"
        assert _quality(run.data.metrics) == _quality(other.data.metrics), label
        assert len(_quality(run.data.metrics)) > 10
    pids = {r.data.tags["kbench.worker"] for r in results["dask"].values()}
    assert str(os.getpid()) not in {p.rsplit(":", 1)[1] for p in pids}  # computed on the workers


def _seconds(text: str) -> float:
    """4.2s, 1m04s, 1h02m -> seconds (as kbench.sweep.run.duration prints them)."""
    m = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:([\d.]+)s)?", text)
    hours, minutes, seconds = (float(g) if g else 0.0 for g in m.groups())
    return hours * 3600 + minutes * 60 + seconds


PICK = re.compile(r"^recommendation: (?:provisional: )?(\S+) \(", re.M)  # the label a recommendation line names


@pytest.mark.slow
def test_sweep_console_compare_and_the_mlflow_parent_name_one_recommended_config(workspace, tmp_path, capsys):
    """A variants-only sweep through `kbench sweep`: its baseline runs too, each config's line gives its own
    time, the end ranks the configs and ends with the recommendation and its resolved config; `kbench compare`
    on the sweep and the MLflow parent (tags, description, winner.yaml, metrics) name the same config."""
    data = sweep_data(workspace, variants=[{"name": "small-chunks", "chunking.chunk_size": 300,
                                            "chunking.chunk_overlap": 0},
                                           {"name": "few", "retrieval.top_k": 3}])
    config = tmp_path / "sweep.yaml"
    config.write_text(yaml.safe_dump(data))
    assert main(["sweep", str(config)]) == 0
    out = capsys.readouterr().out
    parent_id = re.search(r"MLflow parent run (\w+)", out).group(1)
    client = MlflowClient(f"sqlite:///{workspace / 'mlflow.db'}")
    parent = client.get_run(parent_id)
    children = {r.data.tags[LABEL]: r for r in runs_of(workspace)[1]
                if r.data.tags.get("mlflow.parentRunId") == parent_id and r.info.status == "FINISHED"}
    assert set(children) == {"baseline", "small-chunks", "few"}  # the baseline of the variants ran

    # top_k 3 against top_k 20 scored at @5 and @10: said at the start and at the end, and tagged
    assert out.count("warning: retrieval.top_k 3 is below evaluation.k [5, 10]") == 2
    assert "top_k 3" in parent.data.tags["kbench.sweep.warnings"]

    # per-config times are each config's own: they add up to at most the time the sweep took
    lines = re.findall(r"\[(\d)/3\] (\S+): chunk_ndcg_at_10 [\d.]+(?: \(embedding .*?\))? in (\S+) \((\S+) into "
                       r"the sweep", out)  # the drift of the backend that ran, when this machine chose it (issue 55)
    assert [int(n) for n, *_ in lines] == [1, 2, 3]
    own = [_seconds(t) for *_, t, _ in lines]
    elapsed = [_seconds(e) for *_, e in lines]
    assert elapsed == sorted(elapsed) and sum(own) <= elapsed[-1] + 0.2
    for (_, label, _, _), seconds in zip(lines, own):
        stages = sum(v for k, v in children[label].data.metrics.items() if k.startswith("time_s_"))
        assert stages <= seconds + 0.06, label  # a config's stages fit in its own time

    # the ranking, best first, then the recommendation (the last word) and where its resolved config is
    cmp = compare_runs(parent_id, tracking_uri=str(client.tracking_uri))
    assert cmp.baseline == "baseline"
    ranking = cmp.ranking()
    positions = [out.index(f"  {rank}  {label}") for rank, label in zip(ranking["rank"], ranking["config"])]
    assert positions == sorted(positions)
    found = recommend_comparison(cmp, RecommendConfig())
    pick = found.config
    assert found.metrics == ["chunk_ndcg_at_10", "doc_ndcg_at_10", "chunk_recall_at_10"]
    assert found.best == ranking.iloc[0]["config"] and pick in found.within_margin
    assert out.index("Ranking on chunk_ndcg_at_10") < out.index(found.lines()[0])
    assert "winner: " not in out and "tied with it" not in out
    winner_yaml = Path(re.search(r"resolved config: (\S+)", out).group(1))

    # three surfaces, one config: the sweep's console, kbench compare on the sweep, the MLflow parent
    console = PICK.findall(out)
    assert main(["compare", "--sweep", parent_id, "--tracking-uri", str(client.tracking_uri),
                 "--out", str(tmp_path / "compared")]) == 0
    compared = PICK.findall(capsys.readouterr().out)
    note = parent.data.tags["mlflow.note.content"]
    assert console == compared == PICK.findall(note) == [pick]
    provisional = "" if found.decided else " (provisional: the set cannot decide)"
    headline = f"**Recommended{provisional}: {pick}**"
    assert headline in note and "Winner" not in note and "| rank | config |" in note
    assert found.lines()[0] in note
    assert parent.data.tags["kbench.sweep.winner"] == parent.data.tags["kbench.sweep.recommendation"] == pick
    assert parent.data.tags["kbench.sweep.winner_run_id"] == children[pick].info.run_id
    assert parent.data.tags["kbench.sweep.decided"] == str(found.decided).lower()
    assert parent.data.tags["kbench.sweep.headline"] == "chunk_ndcg_at_10"
    assert json.loads(parent.data.tags["kbench.sweep.recommend_by"]) == RecommendConfig().model_dump()
    for key, value in children[pick].data.metrics.items():  # the parent carries the recommended config's metrics
        assert parent.data.metrics[key] == pytest.approx(value), key
    assert load_experiment(winner_yaml).run_key() == children[pick].data.tags["kbench.run_key"]
    assert winner_yaml.read_text().startswith(f"# The recommendation of sweep t (parent run {parent_id}): "
                                              f"{found.reason}\n")
    # issue 50: the bound on every surface, from the one record
    assert f"# {found.bound_line().strip()}\n" in winner_yaml.read_text() and found.bound_line() in out
    assert parent.data.tags["kbench.sweep.bound"] == f"{found.bound:.4f}"
    assert parent.data.tags["kbench.sweep.ruled_out"] == (", ".join(found.ruled_out) or "none")
    assert parent.data.metrics["recommendation_bound"] == pytest.approx(found.bound)
    assert found.bound_line().strip() in note
    artifacts = {a.path for a in client.list_artifacts(parent_id)}
    assert "winner.yaml" in artifacts and "report" in artifacts and "recommended.yaml" not in artifacts
    logged = client.download_artifacts(parent_id, "winner.yaml", str(tmp_path))
    assert Path(logged).read_text() == winner_yaml.read_text()
    report = client.download_artifacts(parent_id, "report/report.md", str(tmp_path))
    assert "## Recommendation\n\n- " + found.lines()[0] in Path(report).read_text()  # the HTML report's source


def test_each_child_run_and_the_report_show_what_the_configs_ran(workspace, tmp_path, capsys):
    """A section-valued grid through `kbench sweep`: the console table, every child's kbench.knob.* tags and
    the report show each chunker's resolved knobs (markdown at its own 2000, not the baseline's 600)."""
    data = sweep_data(workspace, retrieval={"legs": ["bm25"], "top_k": 10},
                      sweep={"chunking": [{"strategy": "fixed", "chunk_size": 600, "chunk_overlap": 100},
                                          {"strategy": "markdown"}]})
    config = tmp_path / "sweep.yaml"
    config.write_text(yaml.safe_dump(data))
    assert main(["sweep", str(config), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.count("label chunking=markdown = {\"strategy\": \"markdown\"}") == 2  # at the start and the end
    assert "in ranking order:" in out and "its knobs: " in out
    parent_id = re.search(r"MLflow parent run (\w+)", out).group(1)
    client, runs = runs_of(workspace)
    children = {r.data.tags[LABEL]: r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent_id}
    markdown, fixed = children["chunking=markdown"].data.tags, children["chunking=fixed"].data.tags
    assert markdown["kbench.knob.chunking.chunk_size"] == "2000" and fixed["kbench.knob.chunking.chunk_size"] == "600"
    assert fixed["kbench.knob.chunking.max_depth"] == "-" and markdown["kbench.knob.chunking.max_depth"] == "3"
    assert children["chunking=markdown"].data.params["chunking.chunk_size"] == "2000"
    report = (workspace / "sweeps").glob("*/report/report.md")
    text = next(report).read_text()
    assert "## What each config ran" in text and "| chunking=markdown | markdown | 2000 |" in text
    assert "Each config's knobs that differ" in client.get_run(parent_id).data.tags["mlflow.note.content"]
    # kbench compare --sweep builds the same table from the children's tags
    assert main(["compare", "--sweep", parent_id, "--tracking-uri", f"sqlite:///{workspace / 'mlflow.db'}",
                 "--out", str(tmp_path / "cmp")]) == 0
    assert "| chunking=markdown | markdown | 2000 |" in (tmp_path / "cmp" / "report.md").read_text()
