"""Every notebook under notebooks/ runs with the ci profile through papermill, passes nbval (lax: only cells marked
NBVAL_CHECK_OUTPUT are compared), shows every figure it saves, and leaves one MLflow run with the executed notebook
and its plots; a failing cell ends that run FAILED with the cell named."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from kbench.studies import NOTEBOOKS_DIR, NotebookError, notebook_names, run_all, run_notebook
from kbench.studies.driver import load_profile

pytestmark = pytest.mark.slow
NOTEBOOKS = ["00_quickstart", "01_chunking", "02_embeddings", "03_retrieval", "04_rerank", "05_compare", "06_eval_sets", "07_diagnose"]


def _client(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def _workspace(base: Path, shared_cache_workspace: Path) -> Path:
    base.mkdir(parents=True, exist_ok=True)
    cache = shared_cache_workspace / "cache"
    cache.mkdir(exist_ok=True)
    (base / "cache").symlink_to(cache, target_is_directory=True)
    return base


@pytest.fixture(scope="module")
def ci_run(tmp_path_factory, shared_cache_workspace):
    """`kbench notebooks run --all --profile ci`, into a fresh workspace that shares the session's embeddings."""
    ws = _workspace(tmp_path_factory.mktemp("notebooks") / "ws", shared_cache_workspace)
    results = run_all("ci", {"workspace": str(ws)})
    return ws, {r.name: r for r in results}


def test_committed_notebooks_are_clean_and_parameterized():
    assert notebook_names() == NOTEBOOKS
    for name in NOTEBOOKS:
        nb = nbformat.read(str(NOTEBOOKS_DIR / f"{name}.ipynb"), as_version=4)
        assert nb.cells[0].cell_type == "markdown" and "Question" in nb.cells[0].source
        tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert len(tagged) == 1, f"{name}: {len(tagged)} cells tagged parameters"
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, f"{name}: committed with outputs"
        assert nb.metadata.kernelspec.name == "kbench"


def test_every_notebook_finishes_with_ci_profile(ci_run):
    ws, results = ci_run
    assert list(results) == NOTEBOOKS
    for name, r in results.items():
        assert r.status == "FINISHED", f"{name}: {r.error}"
        assert r.output.parent == ws / "notebooks" and r.output.name.endswith(f"-{name}.ipynb")
        executed = nbformat.read(str(r.output), as_version=4)
        errors = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
        assert not errors
        assert r.plots and all(p.suffix == ".png" and p.stat().st_size > 1000 for p in r.plots)
        shown = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs
                 if "image/png" in o.get("data", {})]
        assert len(shown) >= len(r.plots), f"{name}: saves {len(r.plots)} figures, shows {len(shown)}"
        print(f"{name}: {r.seconds:.1f} s")


def test_mlflow_holds_one_run_per_notebook_with_notebook_and_plots(ci_run):
    ws, results = ci_run
    client = _client(next(iter(results.values())).tracking_uri)
    experiment = client.get_experiment_by_name("notebooks")
    runs = client.search_runs([experiment.experiment_id], filter_string="tags.`kbench.notebook` != ''")
    top = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert sorted(r.data.tags["kbench.notebook"] for r in top) == NOTEBOOKS
    for run in top:
        name = run.data.tags["kbench.notebook"]
        assert run.info.status == "FINISHED"
        assert run.data.params["max_queries"] == str(load_profile("ci", name)["max_queries"])  # the ci sample
        files = {f.path for f in client.list_artifacts(run.info.run_id, "notebook")}
        executed = results[name].output
        # the executed notebook, and the same as HTML, which MLflow's artifact viewer renders
        assert files == {f"notebook/{executed.name}", f"notebook/{executed.with_suffix('.html').name}"}
        plots = [f.path for f in client.list_artifacts(run.info.run_id, "plots")]
        assert plots and all(p.endswith(".png") for p in plots)
        children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == run.info.run_id]
        if name != "05_compare" or children:  # 05 only runs configs itself when it finds none to read back
            assert children and all(c.data.tags["kbench.notebook"] == name for c in children)
    # 05 read 03's runs back from MLflow instead of running its own
    compare = next(r for r in top if r.data.tags["kbench.notebook"] == "05_compare")
    assert not [r for r in runs if r.data.tags.get("mlflow.parentRunId") == compare.info.run_id]


def test_executed_notebooks_pass_nbval(ci_run):
    ws, results = ci_run
    paths = [str(r.output) for r in results.values()]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
                           "--nbval-cell-timeout", "900", "--rootdir", str(ws), *paths],
                          cwd=ws, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout


def test_failing_cell_ends_run_failed_naming_cell(tmp_path, shared_cache_workspace):
    ws = _workspace(tmp_path / "ws", shared_cache_workspace)
    result = run_notebook("00_quickstart", {"workspace": str(ws), "chunk_size": -5})
    assert result.status == "FAILED"
    assert "ConfigError" in result.error and "chunk_size" in result.error
    assert result.error.startswith(f"cell {result.failed_cell} ")
    run = _client(result.tracking_uri).get_run(result.run_id)
    assert run.info.status == "FAILED"
    assert run.data.tags["kbench.failed_cell"] == str(result.failed_cell)
    assert "chunk_size" in run.data.tags["kbench.error"]
    executed = nbformat.read(str(result.output), as_version=4)
    assert "study.run(" in executed.cells[result.failed_cell].source  # the cell named is the one that raised
    names = {f.path for f in _client(result.tracking_uri).list_artifacts(result.run_id)}
    assert {"notebook", "error.txt"} <= names


def test_bad_names_and_parameters_are_clear(tmp_path):
    with pytest.raises(NotebookError, match="no notebook 'nope'.*00_quickstart"):
        run_notebook("nope")
    with pytest.raises(NotebookError, match=r"unknown parameter\(s\) \['chunk_sise'\].*chunk_size"):
        run_notebook("00_quickstart", {"chunk_sise": 400, "workspace": str(tmp_path)})
    with pytest.raises(NotebookError, match="--profile 'cii'.*ci"):
        run_notebook("00_quickstart", profile="cii")


def test_cli_lists_notebooks_with_parameters(capsys):
    from kbench.cli import main

    assert main(["notebooks", "list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in NOTEBOOKS) and "max_queries=None" in out
