"""The MLflow export of a run folder: the run folder is the source of truth, MLflow gets an idempotent copy.

``export_genai`` writes what MLflow 3's own views read, from the folder's files alone (kbench.tracking.run_records):
the question set as the run's dataset input (kbench.tracking.mlflow_dataset), one trace per question with its
expectations (kbench.tracking.mlflow_traces) and the LLM stages' prompts (kbench.tracking.mlflow_pages). The
per-question results table (``per_query_results.json``) travels with the folder's artifacts. Every part checks
what the store holds first, so running it again adds only what is missing.

``export_run_folder`` (``kbench runs export-mlflow FOLDER``) does the whole run for a store that has never seen
it (params, metrics, tags, artifacts, then ``export_genai``), or only ``export_genai`` for the run it finds there
by the tag ``kbench.run_folder``: a fresh store gets everything a logged run has.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kbench.tracking import tags as tag
from kbench.tracking.fingerprint import FINGERPRINT_FILE, UNHASHED, fingerprint_tags
from kbench.tracking.guard import owner_tags
from kbench.tracking.mlflow_dataset import log_dataset_input
from kbench.tracking.mlflow_pages import describe_experiment, register_prompts
from kbench.tracking.mlflow_run import ensure_experiment, flatten, log_finished_run, mlflow_client
from kbench.tracking.mlflow_traces import TraceReport, log_traces
from kbench.tracking.run_page import describe_run, headline_columns
from kbench.tracking.run_records import read_dataset_record, read_prompts
from kbench.errors import UserError
from kbench.filter_strings import literal


class ExportError(UserError, RuntimeError):
    """The run is logged, but its dataset input, traces or prompts could not be written."""


@dataclass
class ExportReport:
    run_id: str = ""
    tracking_uri: str = ""
    created: bool = False  # a new run (else the run the store already had for this folder)
    dataset_input: bool = False  # logged now (False: there already, or no dataset.json)
    traces: TraceReport = field(default_factory=TraceReport)
    prompts: dict[str, int] = field(default_factory=dict)  # registry name -> version linked to the run


def export_genai(client, experiment_id: str, run_id: str, run_dir: Path, *, fresh: bool = False) -> ExportReport:
    """The run folder's dataset input, traces with expectations and prompts, into the run ``run_id`` (``fresh``:
    a run created just now, which cannot hold any of them yet)."""
    report = ExportReport(run_id=run_id, tracking_uri=str(client.tracking_uri))
    record = read_dataset_record(run_dir)
    if record is not None:
        report.dataset_input = log_dataset_input(client, run_id, record)
    report.traces = log_traces(client, experiment_id, run_id, run_dir, fresh=fresh)
    if report.traces.run_trace:  # MLflow counts every trace of the run together ("99 of 99" for 98 questions)
        client.set_tag(run_id, tag.TRACES, report.traces.counted())
    report.prompts = register_prompts(client, run_id, read_prompts(run_dir))
    return report


def export_logged_run(client, experiment_id: str, run_id: str, run_dir: Path) -> ExportReport:
    """``export_genai`` right after a run is logged: a failure is tagged on the run (``kbench.export_error``) and
    raised as one ExportError saying how to finish it."""
    try:
        return export_genai(client, experiment_id, run_id, run_dir, fresh=True)
    except Exception as e:
        error = f"{type(e).__name__}: {e}"
        try:
            client.set_tag(run_id, tag.EXPORT_ERROR, error[:5000])
        except Exception:  # the store itself failing: the message below still says what to do
            pass
        raise ExportError(f"run {run_id} is logged, but its MLflow traces, dataset input or prompts could not be "
                          f"written ({error[:300]}); write them with: kbench runs export-mlflow {run_dir} "
                          f"--tracking-uri {client.tracking_uri}") from e


def describe(client, experiment_id: str, name: str, metrics: dict[str, float], tracking: Any,
             knobs: list[str] | None = None, headline: str | None = None) -> None:
    """The experiment's headline view and description (kbench.tracking.mlflow_pages); ``tracking``: the config's
    tracking section (a dict from a run folder's config.yaml, or the model)."""
    columns = headline_columns(metrics)
    if headline:
        columns = [headline, *(c for c in columns if c != headline)]
    description = (tracking.get("experiment_description") if isinstance(tracking, dict)
                   else tracking.experiment_description)
    describe_experiment(client, experiment_id, name, columns, knobs, description)


def find_exported(client, experiment_id: str, folder_name: str):
    runs = client.search_runs([experiment_id], f"tags.`{tag.RUN_FOLDER}` = {literal(folder_name, 'RUN_FOLDER')}",
                              max_results=1)
    return runs[0] if runs else None


def export_run_folder(run_dir: str | Path, tracking_uri: str | None = None,
                      experiment_name: str | None = None) -> ExportReport:
    """Export a run folder to a store (default: MLFLOW_TRACKING_URI or the folder's workspace's mlflow.db)."""
    run_dir = Path(run_dir).resolve()
    if not (run_dir / "config.yaml").is_file() or not (run_dir / "metrics.json").is_file():
        raise FileNotFoundError(f"{run_dir} is not a kbench run folder (no config.yaml and metrics.json); give a "
                                "folder under <workspace>/runs/")
    config = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8"))
    metrics = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    tracking = config.get("tracking") or {}
    workspace = run_dir.parent.parent
    client = mlflow_client(tracking_uri or tracking.get("tracking_uri"), workspace)
    experiment_id = ensure_experiment(client, experiment_name or tracking.get("experiment") or "kbench", workspace)
    found = find_exported(client, experiment_id, run_dir.name)
    created = found is None
    if created:
        run_id = log_finished_run(client=client, experiment_id=experiment_id,
                                  run_name=tracking.get("run_name") or config.get("name") or run_dir.name,
                                  params=folder_params(config, workspace, run_dir), metrics=metrics,
                                  tags=folder_tags(run_dir, config, metrics), run_dir=run_dir)
    else:
        run_id = found.info.run_id
    describe(client, experiment_id, experiment_name or tracking.get("experiment") or "kbench", metrics, tracking)
    report = export_genai(client, experiment_id, run_id, run_dir)  # a deleted run may have left its traces
    report.created = created
    return report


def folder_params(config: dict[str, Any], workspace: Path, run_dir: Path | None = None) -> dict[str, str]:
    """The params ``kbench run`` logs (mlflow_run.run_params), from a folder's resolved config and, for the embedding
    backend that ran and why (this machine's figures, not in the config), its fingerprint."""
    params = flatten({k: v for k, v in config.items() if k not in ("sweep", "variants")})
    fingerprint = run_dir / FINGERPRINT_FILE if run_dir is not None else None
    if fingerprint is not None and fingerprint.is_file():
        model = json.loads(fingerprint.read_text(encoding="utf-8")).get("model") or {}
        params.update({f"embedding.{k}": str(model[k]) for k in UNHASHED if k in model})
    params["workspace"] = str(workspace)
    return params


def folder_tags(run_dir: Path, config: dict[str, Any], metrics: dict[str, float]) -> dict[str, str]:
    """The tags ``kbench run`` gives a run (its run key is the folder name's last part), from the folder."""
    record = read_dataset_record(run_dir) or {}
    tags = {tag.RUN_KEY: run_dir.name.rsplit("-", 1)[-1], tag.RUN_FOLDER: run_dir.name,
            tag.DATASET: record.get("dataset") or (config.get("dataset") or {}).get("name") or "",
            tag.MLFLOW_NOTE: describe_run(config.get("description") or "", metrics),
            **((config.get("tracking") or {}).get("tags") or {}), **owner_tags()}
    fingerprint = run_dir / FINGERPRINT_FILE
    if fingerprint.is_file():
        tags.update(fingerprint_tags(json.loads(fingerprint.read_text(encoding="utf-8"))))
    return tags
