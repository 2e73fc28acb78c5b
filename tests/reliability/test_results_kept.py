"""A finished run is never lost to what pictures it, and a cutoff no corpus reaches is refused before any work.

``evaluation.k: [1, 99999999999999999999]`` ran the whole pipeline, then matplotlib failed on the k axis (a
number beyond int64): exit 1, six tracebacks, no run folder, nothing in MLflow.
"""
from __future__ import annotations

import json

from kbench.config import load_experiment
from kbench.runner import run_experiment
from tests.reliability.inputs import DEMO, assert_nothing_written, config, error_lines, run_kbench, write_yaml


def test_a_k_beyond_any_corpus_is_refused_before_any_work(tmp_path):
    workspace = tmp_path / "ws"
    cfg = write_yaml(tmp_path / "c.yaml", config(workspace, {"path": str(DEMO)},
                                                 evaluation={"k": [1, 99999999999999999999]}))
    done = run_kbench("run", str(cfg), "--quiet", cwd=tmp_path, timeout=120)
    assert done.code == 2, done.err[-3000:]
    assert "Traceback" not in done.err
    assert "evaluation.k: every k must be at most 1,000,000 (got 99999999999999999999)" in done.err, done.err
    assert_nothing_written(workspace)
    assert not workspace.exists()


def test_a_plot_that_fails_costs_the_run_nothing(tmp_path, monkeypatch, caplog):
    """Whatever breaks a plot (a matplotlib limit, a font, a full cache folder) leaves the results and MLflow."""
    import kbench.tracking.run_folder as run_folder

    def broken_plots(folder, *args):
        (folder / "plots").mkdir()
        (folder / "plots" / "metrics_by_k.png").write_bytes(b"half a PNG")
        raise TypeError("loop of ufunc does not support argument 0 of type float which has no callable rint method")

    monkeypatch.setattr(run_folder, "write_plots", broken_plots)
    workspace = tmp_path / "ws"
    result = run_experiment(load_experiment(config(workspace, {"path": str(DEMO)})), progress=False)
    assert result.tracking_error is None and result.run_dir.is_dir()
    assert json.loads((result.run_dir / "metrics.json").read_text()) == result.metrics
    assert {p.name for p in result.run_dir.iterdir()} >= {"config.yaml", "metrics.json", "per_query.parquet",
                                                         "rankings.parquet", "per_query_results.json"}
    assert not (result.run_dir / "plots").exists()  # no half a picture
    (line,) = [r.getMessage() for r in caplog.records if "plots were not drawn" in r.getMessage()]
    assert "TypeError" in line and "the results are complete without them" in line
    assert (workspace / "mlflow.db").is_file()
