"""Log a finished run to MLflow: flattened params, metrics, and the run folder's files as artifacts.

The default store is ``<workspace>/mlflow.db`` with artifacts in ``<workspace>/mlruns``; a config's
``tracking.tracking_uri`` or ``MLFLOW_TRACKING_URI`` points elsewhere (any tracking server).
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from kbench.dotted import flatten_dotted
from kbench.embedding.choice import backend_record
from kbench.paths import tracking_uri, workspace_dir
from kbench.trace import traced
from kbench.tracking import tags as tag
from kbench.tracking.guard import check_reachable, mark_abandoned, open_store_once, owner_tags
from kbench.tracking.run_folder import RunResult, run_times
from kbench.tracking.run_page import describe_run, table_tags

SECRET_KEY = re.compile(r"(api_key|token|secret|password)(?!_env)", re.IGNORECASE)
MAX_PARAM_CHARS = 6000


def flatten(data: dict[str, Any]) -> dict[str, str]:
    """Nested config -> MLflow params ``{"chunking.chunk_size": "600", ...}`` (JSON text, capped); a key that
    looks like a secret is dropped with everything under it."""
    return {path: (value if isinstance(value, str) else json.dumps(value))[:MAX_PARAM_CHARS]
            for path, value in flatten_dotted(data).items()
            if not any(SECRET_KEY.search(part) for part in path.split("."))}


def run_params(experiment, workspace: Path | None = None) -> dict[str, str]:
    """An experiment's MLflow params: its resolved config, flattened, without the sweep blocks; ``workspace``
    the folder actually used (default: the config's as ``KBENCH_WORKSPACE`` overrides it, made absolute), never
    the config's word for it (``experiments``) when the run wrote elsewhere."""
    params = flatten({k: v for k, v in experiment.resolved().items() if k not in ("sweep", "variants")})
    params.update({f"embedding.{k}": v for k, v in backend_record(experiment.embedding).items()})  # what ran, why
    params["workspace"] = str((workspace or workspace_dir(experiment.workspace)).resolve())
    return params


def run_tags(experiment, metrics: dict[str, float]) -> dict[str, str]:
    """Tags every kbench run carries: its description (the config's, with its metrics rounded) for MLflow's
    run page; ``kbench.llm.partial`` naming the LLM stages that went on below their floor of usable answers
    (metric ``llm_<stage>_partial``, kbench/llm/usable.py)."""
    tags = {tag.MLFLOW_NOTE: describe_run(experiment.description, metrics)}
    partial = sorted(k[len("llm_"):-len("_partial")] for k, v in metrics.items()
                     if k.startswith("llm_") and k.endswith("_partial") and k != "llm_total_partial" and v)
    if partial:
        tags[tag.LLM_PARTIAL] = ", ".join(partial)
    return tags


def ensure_experiment(client, name: str, workspace: Path) -> str:
    """The experiment's id; a new one on the default sqlite store keeps artifacts in <workspace>/mlruns."""
    found = client.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    uri = str(client.tracking_uri)
    location = (workspace / "mlruns").resolve().as_uri() if uri.startswith("sqlite:") else None
    try:
        return client.create_experiment(name, artifact_location=location)
    except Exception:  # a run started at the same time created it between the lookup and here
        found = client.get_experiment_by_name(name)
        if found is None:
            raise
        return found.experiment_id


def mlflow_client(configured_uri: str | None, workspace: Path):
    uri = tracking_uri(configured_uri, workspace)
    check_reachable(uri)  # seconds, not minutes of MLflow's retries
    workspace.mkdir(parents=True, exist_ok=True)
    return open_store_once(uri)  # a new mlflow.db is created by one process at a time


LOGGED_DIGITS = 10  # significant digits a metric keeps in MLflow: float noise (0.20000000000000004) dropped


def logged_value(value: float) -> float:
    """A metric as MLflow stores it: 10 significant digits, far below any difference kbench reports (4 decimals),
    with the last bits of float arithmetic gone (0.1 + 0.1 + 0.0000000000000000x is 0.2 on the run's page)."""
    return float(f"{float(value):.{LOGGED_DIGITS}g}")


def metric_key(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_\-. /]", "_", name)


def log_finished_run(*, client, experiment_id: str, run_name: str, params: dict[str, str],
                     metrics: dict[str, float], tags: dict[str, str], run_dir: Path,
                     parent_run_id: str | None = None, status: str = "FINISHED") -> str:
    """Create one run holding everything at once, with the start and end times its folder recorded (not the
    moment of logging); returns its id."""
    from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME

    all_tags = {MLFLOW_RUN_NAME: run_name, **tags}
    if parent_run_id:
        all_tags[MLFLOW_PARENT_RUN_ID] = parent_run_id
    started_ms, ended_ms = run_times(run_dir)
    run = client.create_run(experiment_id, start_time=started_ms, run_name=run_name, tags=all_tags)
    run_id = run.info.run_id
    try:
        fill_run(client, run_id, params=params, metrics=metrics, run_dir=run_dir)
        client.set_terminated(run_id, status, end_time=ended_ms)
    except BaseException:
        client.set_terminated(run_id, "FAILED")
        raise
    return run_id


def fill_run(client, run_id: str, *, params: dict[str, str], metrics: dict[str, float], run_dir: Path | None,
             tags: dict[str, str] | None = None) -> None:
    """Log params, metrics (NaN left out), tags and the run folder's files into an existing run (its results
    table tagged so that MLflow lists it as a table)."""
    from mlflow.entities import Metric, Param, RunTag

    now = run_times(run_dir)[1] or int(time.time() * 1000)
    tags = {**(tags or {}), **table_tags(run_dir)}
    metric_list = [Metric(metric_key(k), logged_value(v), now, 0) for k, v in metrics.items() if v == v]
    param_list = [Param(k, v) for k, v in params.items()]
    for start in range(0, max(len(metric_list), len(param_list), 1), 100):  # log_batch takes <= 100 params
        client.log_batch(run_id, metrics=metric_list[start:start + 100], params=param_list[start:start + 100],
                         tags=[RunTag(k, v) for k, v in tags.items()] if start == 0 else [])
    if run_dir is not None and run_dir.is_dir():
        client.log_artifacts(run_id, str(run_dir))


def record_failed_run(client, run_id: str, error: str, details: str = "") -> None:
    """Mark a run FAILED with its error: tag ``kbench.error`` (first 5000 characters) and ``error.txt``."""
    client.set_tag(run_id, tag.ERROR, error[:5000])
    try:
        client.log_text(run_id, f"{error}\n\n{details}".strip() + "\n", "error.txt")
    finally:
        client.set_terminated(run_id, "FAILED")


def log_to_mlflow(result: RunResult, workspace: Path, parent_run_id: str | None = None,
                  extra_tags: dict[str, str] | None = None):
    """Log a finished run (its folder already written) and set ``result.run_id`` and ``result.tracking_uri``;
    returns the client and the experiment id (the runner then exports the folder's traces: mlflow_export)."""
    experiment = result.experiment
    client = mlflow_client(experiment.tracking.tracking_uri, workspace)
    experiment_id = ensure_experiment(client, experiment.tracking.experiment, workspace)
    mark_abandoned(client, experiment_id)  # runs a killed process left RUNNING
    params = run_params(experiment, workspace)
    tags = {tag.RUN_KEY: experiment.run_key(), tag.RUN_FOLDER: result.run_dir.name,
            tag.DATASET: result.dataset.name if result.dataset else "",
            **run_tags(experiment, result.metrics), **experiment.tracking.tags, **(extra_tags or {}), **owner_tags()}
    with traced("mlflow"):
        result.run_id = log_finished_run(
            client=client, experiment_id=experiment_id, run_name=experiment.tracking.run_name or experiment.name,
            params=params, metrics=result.metrics, tags=tags, run_dir=result.run_dir, parent_run_id=parent_run_id,
        )
    result.tracking_uri = str(client.tracking_uri)
    return client, experiment_id
