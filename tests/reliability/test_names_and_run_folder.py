"""Run names never escape the workspace or overflow a folder name, and a run folder is complete or absent."""
from __future__ import annotations

import pandas as pd
import pytest
import yaml

from kbench.config import ConfigError, load_experiment
from kbench.tracking.run_folder import folder_name, write_run_folder
from tests.reliability.inputs import assert_nothing_written, config, error_lines, make_beir, run_kbench, write_yaml

BASE = {"dataset": {"name": "demo"}}


@pytest.mark.parametrize("name, fragment", [
    ("", "name: is empty"),
    ("   ", "name: is empty"),
    ("run\nname", "name: holds a control character"),
    ("run\x00", "name: holds a control character"),
    ("x" * 501, "name: is 501 characters long"),
])
def test_names_no_folder_or_mlflow_run_can_carry_are_refused(name, fragment):
    with pytest.raises(ConfigError) as info:
        load_experiment({**BASE, "name": name})
    assert fragment in str(info.value) and "give a short name" in str(info.value)


@pytest.mark.parametrize("tracking, fragment", [
    ({"run_name": ""}, "tracking.run_name: is empty"),
    ({"experiment": " "}, "tracking.experiment: is empty"),
    ({"run_name": "a\tb"}, "tracking.run_name: holds a control character"),
])
def test_tracking_names_are_checked_before_any_work(tracking, fragment):
    with pytest.raises(ConfigError, match=fragment):
        load_experiment({**BASE, "tracking": tracking})


def per_query() -> pd.DataFrame:
    return pd.DataFrame({"query_id": ["q1"], "doc_ndcg_at_10": [0.5]})


@pytest.mark.parametrize("name", ["../../../../escape", "/etc/cron.d/x", "a" * 300, "é" * 200, "..", ".hidden",
                                  "base[dataset.path=/data/x,k=[1, 3]]", "C:\\temp\\x"])
def test_every_accepted_name_makes_one_folder_inside_runs(tmp_path, name):
    workspace = tmp_path / "ws"
    experiment = load_experiment({**BASE, "name": name})
    run_dir = write_run_folder(experiment, workspace, {"m": 1.0}, per_query(), {}, {})
    assert run_dir.parent == workspace / "runs" and run_dir.is_dir()
    assert len(run_dir.name.encode("utf-8")) <= 150 and not run_dir.name.startswith(".")
    outside = [p.name for p in tmp_path.rglob("*") if p.is_dir() and run_dir not in p.parents]  # plots/ is inside
    assert sorted(outside) == sorted(["ws", "runs", run_dir.name])
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["name"] == name  # the full name is kept


def test_folder_name_rules():
    assert folder_name("../../x") == "x"
    assert folder_name("my run / v2") == "my-run-v2"
    assert folder_name("...") == "run"
    assert len(folder_name("é" * 300).encode("utf-8")) == 100  # cut on a character boundary


@pytest.mark.parametrize("failure", [OSError("disk full"), KeyboardInterrupt()])
def test_a_run_folder_that_fails_half_way_leaves_nothing_that_looks_complete(tmp_path, monkeypatch, failure):
    workspace = tmp_path / "ws"
    experiment = load_experiment({**BASE, "name": "half"})

    def fail(*args, **kwargs):
        raise failure

    monkeypatch.setattr(pd.DataFrame, "to_parquet", fail)  # after config.yaml and metrics.json are written
    with pytest.raises(type(failure)):
        write_run_folder(experiment, workspace, {"m": 1.0}, per_query(), {}, {})
    assert list((workspace / "runs").iterdir()) == []


def test_cli_a_path_like_name_runs_and_stays_in_the_workspace(tmp_path):
    workspace = tmp_path / "ws"
    data = config(workspace, {"path": str(make_beir(tmp_path / "beir"))}, name="../../../../escape")
    done = run_kbench("run", str(write_yaml(tmp_path / "c.yaml", data)), "--quiet", cwd=tmp_path)
    assert done.code == 0, done.err
    (run_dir,) = (workspace / "runs").iterdir()
    assert run_dir.name.split("-")[1] == "escape" and (run_dir / "metrics.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["beir", "c.yaml", "ws"]

    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{workspace / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("reliability").experiment_id])
    assert run.info.run_name == "../../../../escape"


def test_cli_a_300_character_name_keeps_its_results(tmp_path):
    workspace = tmp_path / "ws"
    data = config(workspace, {"path": str(make_beir(tmp_path / "beir"))}, name="n" * 300)
    done = run_kbench("run", str(write_yaml(tmp_path / "c.yaml", data)), "--quiet", "--no-log", cwd=tmp_path)
    assert done.code == 0, done.err
    (run_dir,) = (workspace / "runs").iterdir()
    assert (run_dir / "per_query.parquet").is_file() and "n" * 100 in run_dir.name and "n" * 101 not in run_dir.name


def test_cli_an_empty_name_exits_2_before_any_work(tmp_path):
    workspace = tmp_path / "ws"
    data = config(workspace, {"path": str(make_beir(tmp_path / "beir"))}, name="")
    path = write_yaml(tmp_path / "c.yaml", data)
    done = run_kbench("run", str(path), "--quiet", cwd=tmp_path)
    assert done.code == 2
    (line,) = error_lines(done.err)
    assert line == f"kbench: error: {path}: invalid config"
    assert "  - name: is empty; give a short name" in done.err
    assert_nothing_written(workspace)
