"""Every notebook under notebooks/ runs with the ci profile through papermill, shows every figure it saves and leaves
one MLflow run with the executed notebook and its plots; those with cells marked NBVAL_CHECK_OUTPUT pass nbval on a
second execution (lax: only the marked cells are compared); a failing cell ends that run FAILED with the cell named."""
from __future__ import annotations

import json
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from kbench.studies import NOTEBOOKS_DIR, NotebookError, notebook_names, run_all, run_notebook
from kbench.studies.driver import load_profile
from tests.conftest import CHECKOUT_MODELS, built_once

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
    """`kbench notebooks run --all --profile ci`, into a fresh workspace that shares the session's embeddings.

    Run once per test run, in the run folder every xdist worker sees (``built_once``): ``make test`` keeps the
    three tests that read it on one worker (``--dist loadgroup``), but a plain ``pytest -n 2 tests/notebooks``
    spreads them, and each worker then ran all eight notebooks again (twice the CPU, the same checks)."""
    def run(folder: Path) -> None:
        shutil.rmtree(folder / "ws", ignore_errors=True)  # what a run that raised left behind
        ws = _workspace(folder / "ws", shared_cache_workspace)
        results = run_all("ci", {"workspace": str(ws)})
        (folder / "results.pickle").write_bytes(pickle.dumps(results))

    folder = built_once(tmp_path_factory, "notebooks-ci", run)
    results = pickle.loads((folder / "results.pickle").read_bytes())
    return folder / "ws", {r.name: r for r in results}


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


@pytest.mark.xdist_group(CHECKOUT_MODELS)  # 04_rerank trains into the models folder if it has no reranker
def test_every_notebook_finishes_with_ci_profile(ci_run):
    """The suite's slowest item, and why it stays slow: its fixture runs the eight notebooks one after another
    (05_compare reads back the MLflow runs 03_retrieval left, and all share one workspace and its embeddings),
    each in a kernel of its own that loads kbench's stack and MiniLM. The CPU goes to what no earlier notebook
    cached (07's other chunkers and its SciFact sample, 06's generated sets, each of which rewrites its
    documents) and to 04's cross-encoder, trained here when the models folder has none and then scoring every
    candidate; the ci profile (kbench/studies/profiles.yaml) keeps those samples at what still shows each
    notebook's point."""
    ws, results = ci_run
    assert list(results) == NOTEBOOKS
    for name, r in results.items():
        assert r.status == "FINISHED", f"{name}: {r.error}"
        assert r.output.parent == ws / "notebooks" and r.output.name.endswith(f"-{name}.ipynb")
        executed = nbformat.read(str(r.output), as_version=4)
        errors = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
        assert not errors
        streamed = "".join(o.get("text", "") for c in executed.cells if c.cell_type == "code" for o in c.outputs
                           if o.output_type == "stream")
        assert "TqdmWarning" not in streamed and "it/s]" not in streamed, f"{name}: a progress bar in its outputs"
        assert r.plots and all(p.suffix == ".png" and p.stat().st_size > 1000 for p in r.plots)
        shown = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs
                 if "image/png" in o.get("data", {})]
        assert len(shown) >= len(r.plots), f"{name}: saves {len(r.plots)} figures, shows {len(shown)}"
        print(f"{name}: {r.seconds:.1f} s")


@pytest.mark.xdist_group(CHECKOUT_MODELS)  # 04_rerank trains into the models folder if it has no reranker
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


def _checks_output(path: Path) -> bool:
    notebook = nbformat.read(str(path), as_version=4)
    return any("NBVAL_CHECK_OUTPUT" in cell.source for cell in notebook.cells if cell.cell_type == "code")


@pytest.mark.xdist_group(CHECKOUT_MODELS)  # 04_rerank trains into the models folder if it has no reranker
def test_executed_notebooks_pass_nbval(ci_run):
    """nbval --nbval-lax re-executes a notebook and compares only the cells marked NBVAL_CHECK_OUTPUT with the outputs
    papermill left; every other cell passes if it raises nothing. So it re-executes only the notebooks that have a
    marked cell (00_quickstart's counts: same data and chunker, same counts on a second execution). For the others a
    re-execution would check nothing the papermill run above has not: the same notebook, parameters and kernel ran
    every cell once, and test_every_notebook_finishes_with_ci_profile fails on any error output. Re-executing all
    eight took 293 s of the suite's CPU (issue 44). What stays is one kernel running 00_quickstart again: nbval
    executes the notebook itself, which is what it checks."""
    ws, results = ci_run
    paths = [str(r.output) for r in results.values() if _checks_output(r.output)]
    assert paths, "no notebook has a NBVAL_CHECK_OUTPUT cell: nbval would compare nothing"
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


# --------------------------------------------------------------------------- notebooks take your data
@pytest.fixture(scope="module")
def user_set(tmp_path_factory):
    """A user's own folder of markdown docs (no questions) and a heading set built from it."""
    from functools import partial

    from kbench.datasets.synthetic import METHODS, build_synthetic
    from kbench.sources.folder import FolderSource
    from tests.conftest import DEMO

    root = tmp_path_factory.mktemp("user")
    docs = root / "my-docs"
    for page in sorted((DEMO / "docs").rglob("*.md"))[:8]:
        target = docs / page.relative_to(DEMO / "docs")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(page.read_text(encoding="utf-8"), encoding="utf-8")
    documents, _ = FolderSource(docs, [], []).load()
    heading = METHODS["heading"]
    build_synthetic(documents, root / "my-set", method="heading", propose=partial(heading.propose,
                    params=heading.DEFAULTS), max_questions=12, seed=0, verbatim_scope="document")
    return root, docs, root / "my-set"


def _child_params(result) -> dict:
    client = _client(result.tracking_uri)
    children = client.search_runs([client.get_run(result.run_id).info.experiment_id],
                                  filter_string=f"tags.`mlflow.parentRunId` = '{result.run_id}'")
    assert children, "the notebook ran no config"
    return children[0].data.params


def test_a_notebook_runs_on_a_dataset_folder_given_by_path(user_set, tmp_path, shared_cache_workspace, monkeypatch):
    """Slow (a kernel that loads kbench's stack and MiniLM, then one run) because what it checks is that path:
    papermill's kernel reading a relative folder from the user's working directory."""
    root, _, my_set = user_set
    ws = _workspace(tmp_path / "ws", shared_cache_workspace)
    monkeypatch.chdir(root)  # a path relative to where the user is
    result = run_notebook("00_quickstart", {"dataset": "my-set", "workspace": str(ws)})
    assert result.status == "FINISHED", result.error
    params = _child_params(result)
    assert params["dataset.path"] == str(my_set) and params.get("dataset.name") in (None, "None", "null")


def test_config_is_honoured_with_its_dataset_and_the_gate_example_runs_on_a_user_folder(
        user_set, tmp_path, shared_cache_workspace, monkeypatch):
    """The trap: `-p config my.yaml` silently ran on the demo set. docs/kbench-gate.yml's commands, on a config
    whose dataset is the user's folder: the notebook's run is on that folder, and the gate compares on it.
    Slow because it runs those commands as written: a notebook kernel, then the gate's two runs."""
    import yaml

    from kbench.cli import main

    root, _, my_set = user_set
    monkeypatch.chdir(root)
    ws = _workspace(root / "ci-workspace", shared_cache_workspace)
    (root / "configs" / "ci").mkdir(parents=True)
    for name, size in (("baseline", 600), ("candidate", 400)):
        (root / "configs" / "ci" / f"{name}.yaml").write_text(yaml.safe_dump({
            "name": name, "workspace": "ci-workspace", "dataset": {"path": "my-set"},  # relative, as in a repo
            "chunking": {"strategy": "fixed", "chunk_size": size, "chunk_overlap": 0},
            "retrieval": {"legs": ["vector"], "top_k": 10}, "evaluation": {"k": [1, 5, 10]}}))
    assert main(["notebooks", "run", "00_quickstart", "-p", "config", "configs/ci/candidate.yaml",
                 "-p", "workspace", "ci-workspace"]) == 0
    client = _client(f"sqlite:///{ws / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("notebooks")
    child = next(r for r in client.search_runs([experiment.experiment_id])
                 if r.data.tags.get("mlflow.parentRunId"))
    assert child.data.params["dataset.path"] == "my-set" and child.data.params["chunking.chunk_size"] == "400"
    assert child.data.tags["kbench.dataset"] == "my-set"  # the user's folder, not demo
    code = main(["gate", "configs/ci/baseline.yaml", "configs/ci/candidate.yaml", "--margin", "0.01",
                 "--json", "gate.json"])
    assert code in (0, 1)  # pass or a significant loss: either way a verdict on the user's folder
    assert json.loads((root / "gate.json").read_text())


def test_a_dataset_or_config_that_names_nothing_is_refused_before_anything_runs(user_set, tmp_path, capsys):
    from kbench.cli import main

    _, docs, _ = user_set
    for args, message in ((["-p", "dataset", "nope"], "neither a registered dataset"),
                          (["-p", "dataset", str(docs)], "holds no questions"),
                          (["-p", "config", str(tmp_path / "missing.yaml")], "no such file")):
        with pytest.raises(SystemExit) as exit_info:
            main(["notebooks", "run", "00_quickstart", "-p", "workspace", str(tmp_path / "ws"), *args])
        assert exit_info.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "ws").exists()  # refused before the notebook's MLflow run


def test_study_takes_the_configs_dataset_and_model_unless_given(user_set, tmp_path):
    import yaml

    from kbench.studies import Study

    _, _, my_set = user_set
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"dataset": {"path": str(my_set)}, "embedding": {"model": "paraphrase-MiniLM-L3-v2"},
                                      "evaluation": {"k": [3]}}))
    study = Study("t", workspace=str(tmp_path), config_file=str(config))
    experiment = study.config()
    assert experiment.dataset.path == str(my_set) and experiment.embedding.model == "paraphrase-MiniLM-L3-v2"
    assert experiment.evaluation.k == [1, 3, 5, 10]  # the config's k and the notebook's
    given = Study("t", dataset="demo", model="all-MiniLM-L6-v2", workspace=str(tmp_path), config_file=str(config))
    assert given.config().dataset.name == "demo" and given.config().embedding.model == "all-MiniLM-L6-v2"
    assert Study("t", workspace=str(tmp_path)).config().dataset.name == "demo"  # no config: the demo set
