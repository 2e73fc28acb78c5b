"""tools/screenshots.py (issue 42 item 6): the sweep report is rendered from its file, never through MLflow's
/get-artifact (an attachment headless Chromium downloads, 300 s lost); the Traces tab and Datasets view are shot."""
from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from kbench.tracking import tags as tag

TOOL = Path(__file__).resolve().parents[2] / "tools" / "screenshots.py"


def load_tool():
    spec = importlib.util.spec_from_file_location("screenshots_tool", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sweep_store(workspace: Path) -> tuple[str, str]:
    uri = f"sqlite:///{workspace / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment_id = client.create_experiment("t", artifact_location=(workspace / "mlruns").as_uri())
    parent = client.create_run(experiment_id, tags={tag.SWEEP_ROLE: "parent", tag.SWEEP_KEY: "abc123"}).info.run_id
    report = workspace / "sweeps" / "abc123" / "report"
    report.mkdir(parents=True)
    (report / "report.html").write_text("<html><body><h1>Ranking on chunk_ndcg_at_10</h1></body></html>")
    return uri, parent


def test_the_report_is_a_file_url_and_traces_and_datasets_are_shot(tmp_path):
    tool = load_tool()
    uri, parent = sweep_store(tmp_path)
    found = tool.pages(uri, "http://127.0.0.1:5055", tmp_path, tmp_path / "scratch")
    assert found["sweep_report"] == (tmp_path / "sweeps" / "abc123" / "report" / "report.html").resolve().as_uri()
    assert not any("get-artifact" in url for url in found.values())
    assert found["experiment_traces"].endswith("/traces") and found["experiment_datasets"].endswith("/datasets")
    # the folder gone (another machine): the parent's logged artifact, downloaded
    MlflowClient(uri).log_artifacts(parent, str(tmp_path / "sweeps" / "abc123" / "report"), "report")
    shutil.rmtree(tmp_path / "sweeps")
    again = tool.pages(uri, "http://127.0.0.1:5055", tmp_path, tmp_path / "scratch")
    assert again["sweep_report"].startswith("file://") and Path(again["sweep_report"][7:]).is_file()


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is what the tool drives")
def test_chromium_renders_the_report_file_to_a_png(tmp_path):
    tool = load_tool()
    sweep_store(tmp_path)
    report = (tmp_path / "sweeps" / "abc123" / "report" / "report.html").resolve()
    shot = tool.shoot(shutil.which("chromium"), report.as_uri(), tmp_path / "report.png", timeout=120)
    assert shot is not None and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
