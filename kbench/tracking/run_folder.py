"""The run folder: everything one run computed, on disk, before MLflow is contacted.

``<workspace>/runs/<UTC stamp>-<name>-<run key>/`` holds ``config.yaml`` (the resolved config),
``metrics.json``, ``stages.json`` (seconds and counts per stage, when the run started and ended),
``per_query.parquet``, ``fingerprint.json`` (dataset hash, chunker source, model revision, index, kbench
version), for a kbench search ``rankings.parquet`` (one row per hit: query_id, rank, chunk_id, doc_id, score,
offsets and each leg's rank and score), what a person reads (``run_page``): ``plots/*.png`` and
``per_query_results.json``, the questions with their scores and top hits; and what the MLflow export reads
(``run_records``): ``dataset.json`` (the question set and its labels), ``candidates.parquet`` (each stage's list
for the traced questions) and ``prompts.json`` (the LLM stages' prompts). MLflow receives the same files as
artifacts (and traces, a dataset input, expectations built from them); a tracking failure never loses them.

The name part is the run's name made a safe folder name (``folder_name``), so no name can place the
folder outside ``<workspace>/runs``. The folder is written under a hidden temporary name and renamed
when every file is in place: a folder with the final name is always complete.
"""
from __future__ import annotations

import json
import logging
import os
import re
import shutil
import unicodedata
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import pandas as pd
import yaml

from kbench.cache import pid_alive
from kbench.errors import ConfigError
from kbench.records import Chunk, Dataset, Run
from kbench.trace import traced
from kbench.tracking.run_page import PLOTS_DIR, results_table, write_plots, write_results_table
from kbench.tracking.run_records import (CANDIDATES_FILE, candidates_frame, dataset_record, rankings_frame,
                                        stage_prompts, traced_query_ids, write_dataset_record, write_prompts)

log = logging.getLogger(__name__)

if TYPE_CHECKING:  # annotations only: tracking sits above config, which composes tracking's own section
    from kbench.config import Experiment


@dataclass
class RunResult:
    """One finished run: its config, scores, stage timings and counts, where its folder is and (once logged)
    its MLflow id."""

    experiment: "Experiment"
    metrics: dict[str, float]
    per_query: pd.DataFrame
    stage_seconds: dict[str, float]
    counts: dict[str, int]
    run_dir: Path
    run_id: str | None = None
    tracking_uri: str | None = None
    chunks: list[Chunk] = field(default_factory=list, repr=False)
    dataset: Dataset | None = field(default=None, repr=False)
    run: Run | None = field(default=None, repr=False)  # the rankings (None for an imported TREC file)
    tracking_error: str | None = None  # why MLflow could not be reached (the run folder holds the results)
    export_report: object | None = field(default=None, repr=False)  # mlflow_export.ExportReport, once exported
    tags: dict[str, str] = field(default_factory=dict)  # what the pipeline found out, for MLflow (kbench.language.*)


MAX_NAME_BYTES = 100  # of the name part; with the stamp and run key the folder name stays far below 255
_UNSAFE = re.compile(r'[/\\:*?"<>|\s]+')  # path separators, characters Windows refuses, whitespace


def folder_name(name: str) -> str:
    """``name`` as one safe folder name: no path separators or control characters, no leading dot, at most
    ``MAX_NAME_BYTES`` bytes of UTF-8 (cut on a character boundary); "run" when nothing is left."""
    text = "".join(ch for ch in name if not unicodedata.category(ch).startswith("C"))
    text = _UNSAFE.sub("-", text).strip("-.")
    text = text.encode("utf-8")[:MAX_NAME_BYTES].decode("utf-8", errors="ignore").rstrip("-.")
    return text or "run"


WORKSPACE_FOLDERS = ("runs", "cache", "stores", "sweeps")  # what kbench creates inside a workspace


def check_workspace(workspace: Path) -> None:
    """Before any work: the workspace is a folder this process can write, or will be one, and so is each folder
    kbench keeps in it (a file named ``runs`` failed only after the whole run, with a traceback)."""
    fix = "set workspace (or KBENCH_WORKSPACE) to a writable folder"
    existing = next(p for p in (workspace, *workspace.parents) if p.exists())
    if not existing.is_dir():
        where = "" if existing == workspace else f" (its parent {existing} is a file)"
        raise ConfigError(f"workspace {workspace} is not a folder{where}; move that file away or {fix}")
    for path in (existing, *(workspace / name for name in WORKSPACE_FOLDERS if existing == workspace)):
        if path != existing and path.exists() and not path.is_dir():
            raise ConfigError(f"workspace {workspace}: {path} is a file where kbench keeps its {path.name} folder; "
                              f"move that file away or {fix}")
        if path.is_dir() and not os.access(path, os.W_OK | os.X_OK):  # EROFS on a read-only mount, even for root
            what = "is read-only" if os.statvfs(path).f_flag & os.ST_RDONLY else "is not writable by this user"
            raise ConfigError(f"workspace {workspace}: {path} {what}; {fix}")


PARTIAL = ".partial-"  # + the writing process's pid + "-" + the folder's final name


def remove_abandoned_partials(runs: Path) -> list[Path]:
    """Delete the ``.partial-<pid>-*`` folders whose writer is gone (a kill -9 mid-write); those removed."""
    removed = []
    for partial in runs.glob(f"{PARTIAL}*"):
        pid = partial.name[len(PARTIAL):].split("-", 1)[0]
        if pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(partial, ignore_errors=True)
            removed.append(partial)
    return removed


def write_complete(folder: Path, write: Callable[[Path], None]) -> Path:
    """Fill ``folder`` through ``write(partial)`` under a hidden ``.partial-`` name, then rename it into place:
    a crash or Ctrl-C never leaves a folder that looks complete and is not."""
    partial = folder.parent / f"{PARTIAL}{os.getpid()}-{folder.name}"
    folder.parent.mkdir(parents=True, exist_ok=True)
    remove_abandoned_partials(folder.parent)
    partial.mkdir()
    try:
        write(partial)
        partial.rename(folder)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return folder


def write_run_folder(experiment: "Experiment", workspace: Path, metrics: dict[str, float], per_query: pd.DataFrame,
                     stage_seconds: dict[str, float], counts: dict[str, int], run: Run | None = None,
                     fingerprint: dict | None = None, *, dataset: Dataset | None = None,
                     chunks: list[Chunk] | None = None, started_ms: int | None = None) -> Path:
    """Write the run folder; ``dataset`` and ``chunks`` give the results table its questions and hit texts,
    ``started_ms`` (epoch milliseconds) is when the run began (its end is now)."""
    now = datetime.now(timezone.utc)
    stamp = now.strftime("%Y%m%dT%H%M%S%fZ")
    run_dir = workspace / "runs" / f"{stamp}-{folder_name(experiment.name)}-{experiment.run_key()}"
    ended_ms = int(now.timestamp() * 1000)
    times = {"started_ms": started_ms if started_ms is not None else ended_ms, "ended_ms": ended_ms}

    def write(folder: Path) -> None:
        (folder / "config.yaml").write_text(yaml.safe_dump(experiment.resolved(), sort_keys=False), encoding="utf-8")
        (folder / "metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True), encoding="utf-8")
        (folder / "stages.json").write_text(json.dumps({"seconds": stage_seconds, "counts": counts, **times},
                                                       indent=2), encoding="utf-8")
        per_query.to_parquet(folder / "per_query.parquet", index=False)
        if run is not None:  # scores and evidence per hit, for TREC/ranx export and the MLflow traces
            rankings_frame(run).to_parquet(folder / "rankings.parquet", index=False)
        if fingerprint is not None:  # what the numbers depend on beyond the config (tracking/fingerprint.py)
            (folder / "fingerprint.json").write_text(json.dumps(fingerprint, indent=2, sort_keys=True),
                                                     encoding="utf-8")
        if dataset is not None:  # the question set and its labels: the MLflow dataset input and expectations
            content_hash = (fingerprint or {}).get("dataset_hash") or dataset.content_hash or "unavailable"
            write_dataset_record(folder, dataset_record(dataset, experiment.dataset, content_hash))
            traced = traced_query_ids([q.query_id for q in dataset.queries], experiment.tracking.traces)
            if run is not None and traced:
                candidates_frame(run, chunks or [], traced, experiment.tracking.traces.max_documents).to_parquet(
                    folder / CANDIDATES_FILE, index=False)
        write_prompts(folder, stage_prompts(experiment))
        if "query_id" in per_query.columns:
            write_results_table(folder, results_table(per_query, dataset, chunks or [], run))
        try:
            write_plots(folder, metrics, stage_seconds, per_query)
        except Exception as e:  # noqa: BLE001 - a plot pictures the results; it is never worth losing them
            shutil.rmtree(folder / PLOTS_DIR, ignore_errors=True)
            log.warning("run folder: the plots were not drawn (%s: %s); the results are complete without them",
                        type(e).__name__, str(e)[:160])

    with traced("run_folder"):
        return write_complete(run_dir, write)


def run_times(run_dir: Path | None) -> tuple[int | None, int | None]:
    """When the run in ``run_dir`` started and ended (epoch milliseconds), as its stages.json says."""
    try:
        stages = json.loads((run_dir / "stages.json").read_text(encoding="utf-8")) if run_dir else {}
    except (OSError, ValueError):
        return None, None
    return stages.get("started_ms"), stages.get("ended_ms")
