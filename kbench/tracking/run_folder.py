"""The run folder: everything one run computed, on disk, before MLflow is contacted.

``<workspace>/runs/<UTC stamp>-<name>-<run key>/`` holds ``config.yaml`` (the resolved config),
``metrics.json``, ``stages.json`` (seconds and counts per stage), ``per_query.parquet`` and, for a kbench
search, ``rankings.parquet`` (one row per hit: query_id, rank, chunk_id, doc_id, score). MLflow receives
the same files as artifacts; a tracking failure never loses them.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import yaml

from kbench.records import Chunk, Dataset, Run

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


def write_run_folder(experiment: "Experiment", workspace: Path, metrics: dict[str, float], per_query: pd.DataFrame,
                     stage_seconds: dict[str, float], counts: dict[str, int], run: Run | None = None) -> Path:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    run_dir = workspace / "runs" / f"{stamp}-{experiment.name}-{experiment.run_key()}"
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(experiment.resolved(), sort_keys=False), encoding="utf-8")
    (run_dir / "metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True), encoding="utf-8")
    (run_dir / "stages.json").write_text(json.dumps({"seconds": stage_seconds, "counts": counts}, indent=2),
                                         encoding="utf-8")
    per_query.to_parquet(run_dir / "per_query.parquet", index=False)
    if run is not None:  # scores per hit, for TREC/ranx export of logged runs
        run.to_frame().to_parquet(run_dir / "rankings.parquet", index=False)
    return run_dir
