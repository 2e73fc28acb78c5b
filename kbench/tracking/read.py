"""Reading logged runs back from MLflow: the client, a sweep's children, a run's per-query scores,
its config and its rankings. Comparison, export and sweeps resume all read through here."""
from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, TypeVar

import pandas as pd
import yaml

from kbench.paths import workspace_dir
from kbench.records import Run
from kbench.tracking import tags as tag
from kbench.tracking.mlflow_run import tracking_uri as resolve_uri
from kbench.tracking.run_records import ranked_hits
from kbench.errors import UserError
from kbench.filter_strings import literal


class RunReadError(UserError, ValueError):
    """A logged run that cannot be read back (not found, or not logged by kbench)."""


T = TypeVar("T")


def read_artifact(client, run_id: str, name: str, read: Callable[[Path], T]) -> T:
    """``read(path)`` of the artifact ``name`` of run ``run_id``, downloaded into a temporary folder that is removed
    once read: every artifact kbench reads back goes through here, so no read leaves a folder in /tmp, and none
    draws MLflow's "Downloading artifacts" bar (a comparison reads one file per run)."""
    with tempfile.TemporaryDirectory(prefix="kbench-read-") as folder, _no_artifact_bar():
        return read(Path(client.download_artifacts(run_id, name, folder)))


@contextmanager
def _no_artifact_bar():
    """MLflow reads MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR at each download; a value the user set is kept."""
    if "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR" in os.environ:
        yield
        return
    os.environ["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] = "false"
    try:
        yield
    finally:
        os.environ.pop("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", None)


def tracking_client(tracking_uri: str | None = None):
    """An MlflowClient on ``tracking_uri``, else MLFLOW_TRACKING_URI, else the default workspace's store."""
    from mlflow.tracking import MlflowClient

    uri = resolve_uri(tracking_uri, workspace_dir())
    return MlflowClient(tracking_uri=uri, registry_uri=uri)  # prompts are kept in the same store, never elsewhere


def get_run(client, run_id: str):
    try:
        return client.get_run(run_id)
    except Exception:
        raise RunReadError(f"run {run_id!r} not found in {client.tracking_uri} "
                           "(pass --tracking-uri, or run from the workspace that logged it)") from None


def sweep_children(client, experiment_id: str, parent_run_id: str) -> list:
    return client.search_runs([experiment_id], f"tags.mlflow.parentRunId = {literal(parent_run_id, 'sweep run id')}",
                              max_results=50_000)


def finished_sweep_children(client, parent) -> list:
    """The newest FINISHED child per config of a sweep parent, in the order of the sweep plan."""
    newest: dict[str, object] = {}
    for run in sorted(sweep_children(client, parent.info.experiment_id, parent.info.run_id),
                      key=lambda r: r.info.start_time or 0):
        if run.info.status == "FINISHED":
            newest[run.data.tags.get(tag.SWEEP_CONFIG_KEY, run.info.run_id)] = run
    if not newest:
        raise RunReadError(f"sweep parent run {parent.info.run_id} has no FINISHED child runs yet")
    order: dict[str, int] = {}
    try:  # keep the order of the sweep plan when it is there
        plan = read_artifact(client, parent.info.run_id, "sweep_plan.json", lambda p: json.loads(p.read_text()))
        order = {c["run_key"]: i for i, c in enumerate(plan["configs"])}
    except Exception:  # runs grouped by hand under a parent: keep start order
        pass
    return sorted(newest.values(), key=lambda r: order.get(r.data.tags.get(tag.SWEEP_CONFIG_KEY), len(order)))


def find_finished_elsewhere(client, run_key: str, exclude_parent: str):
    """The newest FINISHED run with this run key in any experiment of the store, outside this sweep."""
    experiment_ids = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(experiment_ids, f"tags.`{tag.RUN_KEY}` = {literal(run_key, 'run key')} and "
                                              "attributes.status = 'FINISHED'",
                              order_by=["attributes.start_time DESC"], max_results=50)
    for run in runs:
        if run.data.tags.get("mlflow.parentRunId") != exclude_parent:
            return run
    return None


def artifact_source(run) -> str:
    """The run whose artifacts hold this run's results (a sweep child that reused an equal config links it)."""
    return run.data.tags.get(tag.SWEEP_REUSED_FROM) or run.info.run_id


def read_per_query(client, run) -> tuple[pd.DataFrame, str]:
    """A run's per_query.parquet indexed by query_id, and the id of the run it was read from."""
    source = artifact_source(run)
    try:
        frame = read_artifact(client, source, "per_query.parquet", pd.read_parquet)
    except Exception as e:
        raise RunReadError(f"run {run.info.run_id}: cannot read per_query.parquet from run {source}'s artifacts "
                           f"({type(e).__name__}: {e}); was it logged by kbench?") from None
    if "query_id" not in frame:
        raise RunReadError(f"run {source}: per_query.parquet has no query_id column")
    return frame.set_index("query_id"), source


def read_config(client, run) -> dict[str, Any]:
    """The resolved config a run was logged with (its config.yaml artifact), as plain data."""
    return read_artifact(client, artifact_source(run), "config.yaml",
                         lambda path: yaml.safe_load(path.read_text(encoding="utf-8")))


def read_run(client, run) -> Run:
    """A logged run's rankings (with each hit's offsets and leg evidence where the file has them). Runs logged
    before rankings.parquet existed: the ``retrieved`` chunk ids of per_query.parquet, scored 1/rank."""
    source = artifact_source(run)
    name = run.data.tags.get("mlflow.runName") or source
    try:
        frame = read_artifact(client, source, "rankings.parquet", pd.read_parquet)
    except Exception:  # logged before rankings.parquet existed
        per_query, _ = read_per_query(client, run)
        return run_from_retrieved(per_query.reset_index(), name)
    return ranked_hits(frame, name)


def run_from_retrieved(per_query: pd.DataFrame, name: str = "kbench") -> Run:
    rows = [(qid, rank, chunk_id, chunk_id.rsplit("#", 1)[0], 1.0 / rank)
            for qid, retrieved in zip(per_query["query_id"], per_query["retrieved"])
            for rank, chunk_id in enumerate(list(retrieved), start=1)]
    return Run.from_frame(pd.DataFrame(rows, columns=list(Run.FRAME_COLUMNS)), name)


def find_run(client, run_id: str):
    """A run by its id, or by the start of its id (at least 6 characters, as `kbench runs` prints them) when one
    recent run's id starts with it."""
    try:
        return client.get_run(run_id)
    except Exception:
        pass
    if len(run_id) >= 6 and all(ch in "0123456789abcdef" for ch in run_id.lower()):
        experiment_ids = [e.experiment_id for e in client.search_experiments()]
        matches = [r for r in client.search_runs(experiment_ids, order_by=["attributes.start_time DESC"],
                                                 max_results=5000) if r.info.run_id.startswith(run_id.lower())]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise RunReadError(f"run id {run_id!r} starts {len(matches)} runs' ids "
                               f"({', '.join(r.info.run_id for r in matches[:3])}); give more of it")
    raise RunReadError(f"run {run_id!r} not found in {client.tracking_uri} "
                       "(list runs with `kbench runs`; pass --tracking-uri, or run from the workspace that logged it)")


def recent_runs(client, experiment: str | None = None, limit: int = 20, sweeps_only: bool = False) -> list:
    """The newest runs, newest first: of the experiment named ``experiment``, else of every experiment; with
    ``sweeps_only``, sweep parent runs only."""
    experiments = client.search_experiments()
    if experiment is not None:
        experiments = [e for e in experiments if e.name == experiment]
        if not experiments:
            names = ", ".join(sorted(e.name for e in client.search_experiments())) or "none"
            raise RunReadError(f"no experiment {experiment!r} in {client.tracking_uri}; experiments: {names}")
    if not experiments:
        return []
    return client.search_runs([e.experiment_id for e in experiments], order_by=["attributes.start_time DESC"],
                              max_results=limit,
                              filter_string=f"tags.`{tag.SWEEP_ROLE}` = 'parent'" if sweeps_only else "")


def experiment_names(client) -> dict[str, str]:
    """experiment id -> name, for every experiment of the store."""
    return {e.experiment_id: e.name for e in client.search_experiments()}
