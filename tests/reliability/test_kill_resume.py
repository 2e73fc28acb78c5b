"""A real ``kbench sweep`` killed with SIGKILL at 20 seeded random moments, restarted after each kill, then left to
finish: its results equal an uninterrupted sweep's, no config is logged twice, no cache file or store is torn,
nothing is left RUNNING, and every run folder with a final name is complete.

The sweep is small (4 configs on 5 demo documents: two chunk sizes, vector alone or fused with BM25, the DuckDB
store with its saved FAISS index) so that the kills land in every stage: start-up, chunking, embedding, the
store write, the run folder and the MLflow logging. The kill moments are drawn from what an uninterrupted run
of the same sweep took: its start-up time plus a random slice of its working time, some in the start-up.
"""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml
from mlflow.tracking import MlflowClient

from kbench.store.duckdb_store import DuckStore
from kbench.tracking import tags as tag
from kbench.tracking.run_folder import PARTIAL
from tests.conftest import make_config
from tests.reliability.inputs import KBENCH

KILLS = 20
SEED = 14
RUN_FOLDER_FILES = {"config.yaml", "metrics.json", "stages.json", "per_query.parquet", "rankings.parquet"}


def sweep_file(tmp_path: Path, workspace: Path) -> Path:
    data = make_config(workspace, dataset={"name": "demo", "max_documents": 1, "max_queries": 6, "seed": 2},
                       store={"backend": "duckdb"}, retrieval={"legs": ["vector"], "top_k": 20, "latency": "batch",
                                                               "fusion": {"method": "rrf", "k": 60}})
    data["name"] = "killed"
    data["sweep"] = {"chunking.chunk_size": [250, 400], "retrieval.legs": [["vector"], ["vector", "bm25"]]}
    path = tmp_path / f"sweep-{workspace.name}.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def start(config: Path, log: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "KBENCH_WORKSPACE"}
    return subprocess.Popen([str(KBENCH), "sweep", str(config), "--no-report"], env=env, stdout=log.open("w"),
                            stderr=subprocess.STDOUT, start_new_session=True)


def first_line_seconds(log: Path, proc: subprocess.Popen, started: float) -> float:
    """Seconds until the sweep printed its first line (imports, config, MLflow opened): its start-up."""
    while proc.poll() is None and not log.read_text().strip():
        time.sleep(0.05)
    return time.monotonic() - started


def children(workspace: Path):
    client = MlflowClient(f"sqlite:///{workspace / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("tests")
    return client.search_runs([experiment.experiment_id], max_results=1000) if experiment else []


def quality(metrics: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in metrics.items() if k.startswith(("doc_", "chunk_", "span_"))}


def by_label(runs) -> dict[str, dict[str, float]]:
    return {r.data.tags[tag.SWEEP_LABEL]: quality(r.data.metrics) for r in runs
            if r.data.tags.get(tag.SWEEP_ROLE) == "child" and r.info.status == "FINISHED"}


def cache_is_whole(cache: Path) -> tuple[int, int]:
    """Every finished cache shard reads back (temporary files are never read); (shards, leftover temp files)."""
    shards = temps = 0
    for path in sorted(cache.rglob("*")):
        if not path.is_file():
            continue
        if path.name.startswith(".tmp-"):
            temps += 1
        elif path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as z:
                assert len(z["keys"]) == len(z["vectors"]) > 0 and np.isfinite(z["vectors"]).all(), path
            shards += 1
        elif path.suffix == ".json":
            json.loads(path.read_text(encoding="utf-8"))
            shards += 1
    return shards, temps


@pytest.mark.slow  # about 20 restarts of a real sweep: a few minutes on 2 cores
def test_a_sweep_killed_20_times_then_resumed_equals_an_uninterrupted_one(tmp_path):
    reference_ws = tmp_path / "reference"
    log = tmp_path / "reference.log"
    started = time.monotonic()
    proc = start(sweep_file(tmp_path, reference_ws), log)
    startup = first_line_seconds(log, proc, started)
    assert proc.wait(timeout=900) == 0, log.read_text()[-3000:]
    working = time.monotonic() - started - startup
    reference = by_label(children(reference_ws))
    assert len(reference) == 4 and all(len(m) > 10 for m in reference.values())

    workspace = tmp_path / "killed"
    config = sweep_file(tmp_path, workspace)
    rng = random.Random(SEED)
    moments, finished_at_kill = [], []
    for n in range(KILLS):
        moment = startup + rng.uniform(-0.4, 1.0) * working / 6  # a sixth of the work at most per start
        proc = start(config, tmp_path / f"kill-{n}.log")
        try:
            proc.wait(timeout=max(moment, 0.2))
            break  # it finished before this moment: nothing left to interrupt
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        moments.append(moment)
        finished_at_kill.append(sum(r.info.status == "FINISHED" for r in children(workspace)
                                    if r.data.tags.get(tag.SWEEP_ROLE) == "child"))
    resumed = subprocess.run([str(KBENCH), "sweep", str(config), "--no-report"], capture_output=True, text=True,
                             timeout=900)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]

    runs = children(workspace)
    statuses = Counter(r.info.status for r in runs)
    summary = (f"{len(moments)} kills at {[round(m, 1) for m in moments]} s (start-up {startup:.1f} s, work "
               f"{working:.1f} s); finished configs at each kill {finished_at_kill}; statuses {dict(statuses)}")
    print(summary)
    assert len(moments) == KILLS, summary
    assert "RUNNING" not in statuses and "SCHEDULED" not in statuses, summary
    assert by_label(runs) == reference, summary  # every config, every quality metric, to the last bit
    finished = [r for r in runs if r.data.tags.get(tag.SWEEP_ROLE) == "child" and r.info.status == "FINISHED"]
    assert sorted(Counter(r.data.tags[tag.SWEEP_CONFIG_KEY] for r in finished).values()) == [1, 1, 1, 1]
    assert sorted(Counter(r.data.tags[tag.RUN_KEY] for r in finished).values()) == [1, 1, 1, 1]
    (parent,) = [r for r in runs if r.data.tags.get(tag.SWEEP_ROLE) == "parent"]
    assert parent.info.status == "FINISHED"

    shards, temps = cache_is_whole(workspace / "cache")
    assert shards > 0
    with DuckStore.open(workspace / "stores" / "kbench.duckdb") as store:  # opens, schema checked
        assert store.con.execute("SELECT count(*) FROM archon_crawled_pages").fetchone()[0] > 0
    for folder in (workspace / "runs").iterdir():
        if not folder.name.startswith(PARTIAL):
            assert RUN_FOLDER_FILES <= {p.name for p in folder.iterdir()}, folder
    print(f"cache: {shards} shards whole, {temps} temporary files left by kills (never read)")
