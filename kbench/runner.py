"""Run one experiment and keep it: the pipeline, then the run folder, then MLflow.

Results are written to a run folder under the workspace *before* MLflow is touched, so a tracking
failure never loses finished results. Also here: scoring a TREC run file from another system on a
config's dataset (``import_trec_run``) and exporting a logged run as TREC files (``export_run``).
"""
from __future__ import annotations

import time
from pathlib import Path

from kbench.config import Experiment, validate_experiment
from kbench.datasets import load_dataset
from kbench.evaluation.stage import evaluate_rankings, summarize
from kbench.hashing import sha256_bytes
from kbench.packages import require
from kbench.paths import workspace_dir
from kbench.pipeline import RunError, chunked_dataset, run_pipeline
from kbench.trace import traced
from kbench.tracking import tags as tag
from kbench.tracking.autorag import write_autorag
from kbench.tracking.fingerprint import fingerprint_tags, run_fingerprint
from kbench.tracking.export import (TrecFormatError, chunk_qrels, doc_qrels, read_trec_run, run_from_trec,
                                    write_trec_qrels, write_trec_run)
from kbench.tracking.guard import store_fault
from kbench.tracking.mlflow_export import ExportError, describe, export_logged_run
from kbench.tracking.mlflow_run import log_to_mlflow
from kbench.tracking.read import get_run, read_config, read_run, tracking_client
from kbench.tracking.run_folder import RunResult, write_run_folder

__all__ = ["RunError", "RunResult", "export_run", "import_trec_run", "run_experiment"]


def run_experiment(experiment: Experiment, *, progress: bool = True, log: bool = True,
                   parent_run_id: str | None = None, extra_tags: dict[str, str] | None = None) -> RunResult:
    """Prepare, search and evaluate ``experiment``; write its run folder; log it to MLflow (unless ``log`` is
    off or ``tracking.enabled`` is false)."""
    workspace = workspace_dir(experiment.workspace)
    started_ms = int(time.time() * 1000)
    if log and experiment.tracking.enabled:  # a run that cannot be logged says so before it runs, not after
        require(("mlflow",), "logging the run to MLflow (tracking.enabled; kbench run --no-log runs without it)")
    done = run_pipeline(experiment, progress=progress)
    fingerprint = run_fingerprint(experiment, done.dataset.content_hash)
    run_dir = write_run_folder(experiment, workspace, done.metrics, done.per_query, done.stage_seconds,
                               done.counts, done.run, fingerprint, dataset=done.dataset, chunks=done.chunks,
                               started_ms=started_ms)
    result = RunResult(experiment, done.metrics, done.per_query, done.stage_seconds, done.counts, run_dir,
                       chunks=done.chunks, dataset=done.dataset, run=done.run, tags=done.tags)
    if log and experiment.tracking.enabled:
        try:
            keep_in_mlflow(result, workspace, parent_run_id,
                           {**fingerprint_tags(fingerprint), **done.tags, **(extra_tags or {})})
        except ExportError as e:  # the run is logged; its traces are not: the message says how to write them
            result.tracking_error = str(e)
        except Exception as e:  # a server or disk fault: the results are kept; the caller says where they are
            result.tracking_error = store_fault(e)
            if result.tracking_error is None:
                raise
    return result


def keep_in_mlflow(result: RunResult, workspace: Path, parent_run_id: str | None = None,
                   extra_tags: dict[str, str] | None = None) -> None:
    """Log the run (params, metrics, the folder as artifacts), then export what MLflow's own views read from its
    folder: the dataset input, one trace per question with its labels, the prompts (kbench.tracking.mlflow_export);
    and the experiment's description and headline view."""
    client, experiment_id = log_to_mlflow(result, workspace, parent_run_id, extra_tags)
    tracking = result.experiment.tracking
    describe(client, experiment_id, tracking.experiment, result.metrics, tracking)
    with traced("mlflow_export"):
        result.export_report = export_logged_run(client, experiment_id, result.run_id, result.run_dir)


def import_trec_run(path: str | Path, experiment: Experiment, name: str | None = None, log: bool = True) -> RunResult:
    """Score a TREC run file on ``experiment``'s dataset (document level) and log it as a kbench run.

    The run gets its own run key (a hash of the file), never the config's, so a sweep never mistakes it
    for a kbench computation of that config.
    """
    started_ms = int(time.time() * 1000)
    trec, trec_tag = read_trec_run(path)
    dataset = load_dataset(experiment.dataset)
    known = {q.query_id for q in dataset.queries}
    if not known & set(trec):
        raise TrecFormatError(f"{path}: none of its {len(trec)} query ids are queries of dataset {dataset.name!r} "
                              f"(e.g. {sorted(trec)[:3]} vs {sorted(known)[:3]})")
    experiment = experiment.model_copy(deep=True)
    experiment.name = name or trec_tag or Path(path).stem
    run = run_from_trec(trec, experiment.name)
    per_query = evaluate_rankings(dataset, None, run, experiment.evaluation)  # documents only
    metrics = summarize(per_query)
    counts = {"queries": len(dataset.queries), "documents": len(dataset.documents),
              "run_queries_not_in_dataset": len(set(trec) - known)}
    metrics.update({f"count_{k}": float(v) for k, v in counts.items()})
    workspace = workspace_dir(experiment.workspace)
    run_dir = write_run_folder(experiment, workspace, metrics, per_query, {}, counts, run, dataset=dataset,
                               started_ms=started_ms)
    result = RunResult(experiment, metrics, per_query, {}, counts, run_dir, dataset=dataset, run=run)
    if log and experiment.tracking.enabled:
        digest = sha256_bytes(Path(path).read_bytes(), 16)
        keep_in_mlflow(result, workspace, None, {tag.RUN_KEY: f"trec-{digest}", tag.IMPORTED_FROM: str(path)})
    return result


def export_run(run_id: str, out_dir: str | Path, level: str = "doc", tracking_uri: str | None = None,
               format: str = "trec") -> dict[str, Path]:
    """Write a logged kbench run for other tools: ``trec`` (``run.trec`` and ``qrels.txt``, qrels rebuilt from its
    config's dataset) or ``autorag`` (AutoRAG's corpus.parquet, qa.parquet and retrieval.parquet)."""
    if level not in ("doc", "chunk"):
        raise ValueError(f"level: {level!r}; allowed: doc, chunk")
    if format not in ("trec", "autorag"):
        raise ValueError(f"format: {format!r}; allowed: trec, autorag")
    client = tracking_client(tracking_uri)
    logged = get_run(client, run_id)
    source = logged.data.tags.get(tag.SWEEP_REUSED_FROM) or run_id
    experiment = validate_experiment(read_config(client, logged), f"run {source} config.yaml")
    run = read_run(client, logged)
    if level == "doc" and format == "trec":  # no chunking needed
        dataset, chunks = load_dataset(experiment.dataset), []
        qrels = doc_qrels(dataset)
    else:
        dataset, chunks = chunked_dataset(experiment.dataset, experiment.chunking)
        qrels = doc_qrels(dataset) if level == "doc" else chunk_qrels(dataset, chunks, experiment.evaluation.overlap)
    out = Path(out_dir)
    if format == "autorag":
        return write_autorag(run, dataset, chunks, qrels, out, level)
    run_tag = "".join(ch if not ch.isspace() else "_" for ch in (logged.data.tags.get("mlflow.runName") or source))
    return {"run": write_trec_run(run.to_dict(level), out / "run.trec", run_tag),
            "qrels": write_trec_qrels(qrels, out / "qrels.txt")}
