"""What a run shows in MLflow: metric values at the digits they mean, the workspace actually used (issue 42)."""
from __future__ import annotations

from pathlib import Path

from mlflow.tracking import MlflowClient

from kbench.config import validate_experiment
from kbench.tracking.mlflow_run import ensure_experiment, fill_run, logged_value, run_params
from tests.conftest import make_config


def test_metrics_are_logged_at_ten_significant_digits_without_float_noise(tmp_path):
    assert 0.1 + 0.1 + 0.1 != 0.3 and logged_value(0.1 + 0.1 + 0.1) == 0.3
    assert logged_value(2 / 3) == 0.6666666667 and logged_value(12345.678901234) == 12345.67890
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment_id = ensure_experiment(client, "t", tmp_path)
    run_id = client.create_run(experiment_id).info.run_id
    fill_run(client, run_id, params={}, metrics={"ndcg_at_10": 0.1 + 0.1 + 0.1, "mrr": 2 / 3, "n": 98.0},
             run_dir=None)
    logged = client.get_run(run_id).data.metrics
    assert logged == {"ndcg_at_10": 0.3, "mrr": 0.6666666667, "n": 98.0}
    assert repr(logged["ndcg_at_10"]) == "0.3"


def test_the_workspace_param_is_the_one_used_not_the_configs_word(tmp_path, monkeypatch):
    experiment = validate_experiment(make_config(tmp_path / "configured"))
    monkeypatch.setenv("KBENCH_WORKSPACE", str(tmp_path / "elsewhere"))
    assert run_params(experiment)["workspace"] == str((tmp_path / "elsewhere").resolve())
    monkeypatch.delenv("KBENCH_WORKSPACE")
    monkeypatch.chdir(tmp_path)
    relative = validate_experiment({**make_config(tmp_path), "workspace": "ws"})
    assert run_params(relative)["workspace"] == str(Path(tmp_path / "ws").resolve())
