"""Run the notebooks under notebooks/ with papermill, each as one MLflow run.

    from kbench.studies import run_notebook
    result = run_notebook("01_chunking", {"max_queries": 20}, profile="ci")

The driver creates the notebook's MLflow run first (experiment ``notebooks``, tag ``kbench.notebook``), hands
its id to the notebook as the ``parent_run_id`` parameter (the kbench runs the notebook starts become its
children) and a ``plots_dir`` where the notebook saves its figures. After execution it attaches the executed
notebook and the plots and ends the run FINISHED, or FAILED with the failing cell and error in the tags
``kbench.error`` / ``kbench.failed_cell`` and ``error.txt``. The executed copy is written either way to
``<workspace>/notebooks/<timestamp>-NAME.ipynb``.

Before anything runs, ``dataset`` / ``doc_dataset`` (a registered name or a dataset folder) and ``config`` (an
experiment YAML) are checked and made absolute (kbench/studies/inputs.py): a path is read from the caller's
working directory, and a value that names nothing is refused (exit 2), never replaced by the demo set. The
notebook runs in the caller's working directory too, so a relative path inside their config means what
`kbench run` makes of it there.
"""
from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from kbench import tracking
from kbench.packages import optional_import
from kbench.paths import REPO_ROOT, workspace_dir
from kbench.studies.inputs import NotebookError, resolve_inputs
from kbench.tracking import tags as tag

NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
PROFILES_FILE = Path(__file__).with_name("profiles.yaml")
MLFLOW_EXPERIMENT = "notebooks"
KERNEL = "kbench"


@dataclass
class NotebookResult:
    name: str
    output: Path
    status: str  # FINISHED or FAILED
    seconds: float
    run_id: str | None
    tracking_uri: str
    parameters: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    failed_cell: int | None = None
    plots: list[Path] = field(default_factory=list)


def notebook_names(directory: Path = NOTEBOOKS_DIR) -> list[str]:
    return sorted(p.stem for p in directory.glob("[0-9][0-9]_*.ipynb"))


def notebook_path(name: str, directory: Path = NOTEBOOKS_DIR) -> Path:
    path = directory / f"{Path(name).stem}.ipynb"
    if not path.is_file():
        raise NotebookError(f"no notebook {name!r} in {directory}; available: {', '.join(notebook_names(directory))}")
    return path


def load_profile(profile: str | None, name: str) -> dict[str, Any]:
    if not profile:
        return {}
    profiles = yaml.safe_load(PROFILES_FILE.read_text(encoding="utf-8")) or {}
    if profile not in profiles:
        raise NotebookError(f"--profile {profile!r}: unknown; defined in {PROFILES_FILE}: {', '.join(profiles)}")
    chosen = profiles[profile] or {}
    return {**(chosen.get("all") or {}), **(chosen.get(name) or {})}


# papermill's pattern for one assignment of a parameters cell (papermill.translators.PythonTranslator)
PARAMETER = re.compile(r"^(?P<target>\w[\w_]*)\s*(:\s*[\"']?(?P<annotation>\w[\w_\[\],\s]*)[\"']?\s*)?=\s*"
                       r"(?P<value>.*?)(\s*#\s*(type:\s*(?P<type_comment>[^\s]*)\s*)?(?P<help>.*))?$")


def declared_parameters(path: Path) -> dict[str, Any]:
    """The names and defaults (as written) of the notebook's ``parameters`` cell, read as papermill's inspection
    reads it (``papermill.inspect_notebook``; tests/notebooks/test_driver.py holds the two equal on every notebook)
    without importing papermill, which takes seconds: ``kbench notebooks list`` and a refused notebook run answer
    at once."""
    cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
    cell = next((c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])), None)
    if cell is None:
        return {}
    source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
    declared = {}
    for definition in _definitions(source):
        if definition and (match := PARAMETER.match(definition)) is not None:
            declared[match["target"].strip()] = str(match["value"]).strip()
    return declared


def _definitions(source: str) -> list[str]:
    """One string per assignment, a value spread over lines joined (its comments dropped but the last line's),
    blank and comment lines skipped, a line with two ``=`` left out: papermill's grouping."""
    definitions, lines = [], []
    for line in source.splitlines():
        if not line.strip() or line.strip().startswith("#"):
            continue
        if "=" in line:
            definitions.append(_flatten(lines))
            lines = []
            if line.count("=") > 1:
                continue
        lines.append(line)
    definitions.append(_flatten(lines))
    return definitions


def _flatten(lines: list[str]) -> str:
    flat = "".join((line[:line.index("#")] if "#" in line else line).strip() for line in lines[:-1])
    return flat + (lines[-1].strip() if lines else "")


def parse_value(raw: str) -> Any:
    """``-p key value`` values: YAML scalars/lists (``20``, ``true``, ``[128, 256]``), else the string."""
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw


def _failure(error: BaseException, output: Path) -> tuple[str, int | None]:
    """A readable error naming the failing cell: its index in the executed copy and its first line."""
    from papermill.exceptions import PapermillExecutionError

    if not isinstance(error, PapermillExecutionError):
        return f"{type(error).__name__}: {error}", None
    index = None
    if output.is_file():
        import nbformat

        cells = nbformat.read(str(output), as_version=4).cells
        index = next((i for i, c in enumerate(cells) if c.cell_type == "code"
                      and any(o.get("output_type") == "error" for o in c.get("outputs", []))), None)
    first_line = _cell_source(output, index).strip().splitlines()[:1]
    where = f"cell {index} (execution count {error.exec_count}" + (f", {first_line[0]!r})" if first_line else ")")
    return f"{where} raised {error.ename}: {error.evalue}", index


def _cell_source(path: Path, index: int | None) -> str:
    if index is None or not path.is_file():
        return ""
    import nbformat

    cells = nbformat.read(str(path), as_version=4).cells
    return cells[index].source if 0 <= index < len(cells) else ""


def run_notebook(name: str, parameters: dict[str, Any] | None = None, *, profile: str | None = None,
                 output_dir: str | Path | None = None, directory: Path = NOTEBOOKS_DIR,
                 kernel: str = KERNEL, log=print, cwd: Path | None = None) -> NotebookResult:
    """Execute one notebook with papermill into ``<workspace>/notebooks/``; one MLflow run per execution.
    ``cwd``: where relative dataset and config paths are read from (default: this process's directory)."""
    source = notebook_path(name, directory)
    name = source.stem
    declared = declared_parameters(source)
    params = {**load_profile(profile, name), **(parameters or {})}
    unknown = sorted(set(parameters or {}) - set(declared))
    if unknown:
        raise NotebookError(f"{name}: unknown parameter(s) {unknown}; its parameters cell defines: "
                            f"{', '.join(declared)}")
    params = {k: v for k, v in params.items() if k in declared}  # profile keys other notebooks use
    params = resolve_inputs(params, cwd)  # before any MLflow run: a dataset or config that names nothing, exit 2
    workspace = workspace_dir(str(params.get("workspace", declared.get("workspace") or "experiments")).strip("'\""))
    out_dir = Path(output_dir) if output_dir else workspace / "notebooks"
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    output = out_dir / f"{stamp}-{name}.ipynb"
    plots_dir = out_dir / f"{stamp}-{name}-plots"
    # seconds to import: only once the checks above passed, and before anything is written or logged
    papermill = optional_import("papermill", "kbench notebooks run")
    plots_dir.mkdir(parents=True, exist_ok=True)

    client = tracking.mlflow_run.mlflow_client(params.get("tracking_uri") or None, workspace)
    experiment_id = tracking.mlflow_run.ensure_experiment(client, MLFLOW_EXPERIMENT, workspace)
    run = client.create_run(experiment_id, run_name=name,
                            tags={tag.NOTEBOOK: name, tag.PROFILE: profile or ""})
    run_id = run.info.run_id
    for key, value in params.items():
        client.log_param(run_id, key, str(value)[:6000])
    params.update(workspace=str(workspace), parent_run_id=run_id, plots_dir=str(plots_dir),
                  tracking_uri=str(client.tracking_uri))
    params = {k: v for k, v in params.items() if k in declared}

    log(f"{name}: running -> {output}")
    started = time.perf_counter()
    error = failed_cell = None
    try:
        # run where the caller is: a relative path in their config means what `kbench run` makes of it there
        papermill.execute_notebook(str(source), str(output), parameters=params, kernel_name=kernel,
                                   cwd=str(cwd or Path.cwd()), progress_bar=False, log_output=False,
                                   kernel_manager_class=ipc_kernel_manager())
    except Exception as e:  # the executed copy (with the traceback in the failing cell) is still written
        error, failed_cell = _failure(e, output)
    except BaseException as e:  # interrupted: the run still ends FAILED, not RUNNING forever
        tracking.mlflow_run.record_failed_run(client, run_id, f"{name}: interrupted ({type(e).__name__})")
        raise
    seconds = time.perf_counter() - started
    plots = sorted(p for p in plots_dir.glob("*") if p.is_file())
    client.log_metric(run_id, "notebook_seconds", tracking.mlflow_run.logged_value(seconds))
    if output.is_file():
        client.log_artifact(run_id, str(output), "notebook")
        html = tracking.run_page.write_notebook_html(output)  # MLflow renders HTML, not .ipynb
        if html is not None:
            client.log_artifact(run_id, str(html), "notebook")
    for plot in plots:
        client.log_artifact(run_id, str(plot), "plots")
    if error is None:
        client.set_terminated(run_id, "FINISHED")
        status = "FINISHED"
    else:
        client.set_tag(run_id, tag.FAILED_CELL, str(failed_cell))
        tracking.mlflow_run.record_failed_run(client, run_id, f"{name}: {error}", _cell_source(output, failed_cell))
        status = "FAILED"
    log(f"{name}: {status} in {seconds:.0f} s, MLflow run {run_id}" + (f"\n  {error}" if error else ""))
    return NotebookResult(name, output, status, seconds, run_id, str(client.tracking_uri), params, error,
                          failed_cell, plots)


def ipc_kernel_manager():
    """nbclient's kernel manager, talking to the kernel over IPC sockets beside its connection file (in Jupyter's
    runtime folder) instead of TCP ports: no port is opened, and the kernel has no "running over TCP without
    encryption" warning to print on every notebook run."""
    from jupyter_client.manager import AsyncKernelManager

    class IpcKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.transport = "ipc"

    return IpcKernelManager


def run_all(profile: str | None = None, parameters: dict[str, Any] | None = None, **kwargs) -> list[NotebookResult]:
    """Every notebook in name order; a failed one does not stop the rest. Parameters go to those that take them."""
    results = []
    for name in notebook_names(kwargs.get("directory", NOTEBOOKS_DIR)):
        declared = declared_parameters(notebook_path(name, kwargs.get("directory", NOTEBOOKS_DIR)))
        mine = {k: v for k, v in (parameters or {}).items() if k in declared}
        results.append(run_notebook(name, mine, profile=profile, **kwargs))
    return results


__all__ = ["NotebookError", "NotebookResult", "declared_parameters", "load_profile", "notebook_names",
           "run_all", "run_notebook"]
