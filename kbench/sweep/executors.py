"""Where a sweep's configs are computed: in this process (``local``) or on a Dask cluster (``dask``).

Workers only compute: each runs one config with ``run_experiment(log=False)`` and returns a small
``ComputedRun`` (metrics, counts and the run folder's files). The driver alone writes to MLflow. Why:
with the default sqlite store, several processes writing one database at once fail with "database is
locked" under load, and a tracking server would still see interleaved half-logged runs from workers that
die; one writer also keeps the resume bookkeeping (which configs are done) in one place. Workers share
only content-addressed caches (embeddings, chunks), written by atomic rename, so two workers embedding the
same text at once both write the same bytes.

Scheduling: configs that share their chunking and embedding (``warm_key``) would embed the same texts
twice if started together, so the first of each group runs alone and the rest follow from its cache.
Configs writing one DuckDB file (``serial_key``) never run at the same time.
"""
from __future__ import annotations

import os
import socket
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from kbench.config import validate_experiment
from kbench.errors import UserError, endpoint_problem
from kbench.hashing import stable_hash
from kbench.packages import optional_import
from kbench.paths import workspace_dir
from kbench.runner import run_experiment
from kbench.store.config import StoreConfig


@dataclass
class ComputedRun:
    run_key: str
    metrics: dict[str, float]
    counts: dict[str, int]
    stage_seconds: dict[str, float]
    run_dir: str
    files: dict[str, bytes]  # the run folder's files, so a driver that cannot see the worker's disk still logs them
    dataset_name: str = ""
    host: str = ""
    pid: int = 0
    seconds: float = 0.0  # wall time of this config on its worker, from start to its folder written
    tags: dict[str, str] = field(default_factory=dict)  # the pipeline's own run tags (kbench.language.*)


@dataclass
class Job:
    label: str
    run_key: str
    experiment_data: dict[str, Any]  # Experiment.resolved(), workspace made absolute
    warm_key: str = ""
    serial_key: str | None = None


@dataclass
class JobFailure:
    """A config that raised: the exception's type, message and traceback, as text (picklable, loggable)."""

    error_type: str
    message: str
    traceback: str = ""
    seconds: float = 0.0  # how long the config ran before it failed

    def __str__(self) -> str:
        return f"{self.error_type}: {self.message}"


def warm_key(data: dict[str, Any]) -> str:
    """Configs with equal dataset, chunking, enrichment and embedding embed exactly the same texts."""
    return stable_hash({k: data.get(k) for k in ("dataset", "chunking", "enrichment", "embedding")})


def serial_key(data: dict[str, Any]) -> str | None:
    store = StoreConfig(**(data.get("store") or {}))
    if store.backend == "duckdb":
        return f"duckdb:{store.duckdb_path(Path(data['workspace']))}"
    return None


def make_job(label: str, experiment) -> Job:
    data = experiment.resolved()
    data["workspace"] = str(workspace_dir(experiment.workspace))  # workers may start in another cwd
    return Job(label, experiment.run_key(), data, warm_key(data), serial_key(data))


def compute_config(experiment_data: dict[str, Any], expected_run_key: str, progress: bool = False) -> ComputedRun:
    """Run one config without MLflow and return what the driver needs to log it. Runs on a worker."""
    experiment = validate_experiment(experiment_data, f"sweep config {experiment_data.get('name')!r}")
    if experiment.run_key() != expected_run_key:
        raise RuntimeError(
            f"run key {experiment.run_key()} on this worker differs from the driver's {expected_run_key}: the worker "
            "runs another kbench version or sees other registered strategies; install the same kbench everywhere")
    result = run_experiment(experiment, progress=progress, log=False)
    files = {p.relative_to(result.run_dir).as_posix(): p.read_bytes()
             for p in sorted(result.run_dir.rglob("*")) if p.is_file()}
    return ComputedRun(expected_run_key, result.metrics, result.counts, result.stage_seconds, str(result.run_dir),
                       files, result.dataset.name if result.dataset else "", socket.gethostname(), os.getpid(),
                       tags=result.tags)


def _safe_compute(experiment_data: dict[str, Any], expected_run_key: str,
                  progress: bool = False) -> ComputedRun | JobFailure:
    started = time.perf_counter()
    try:
        outcome = compute_config(experiment_data, expected_run_key, progress)
    except Exception as e:  # a failed config is a result to record, not a reason to stop the sweep
        outcome = JobFailure(type(e).__name__, str(e), traceback.format_exc())
    outcome.seconds = time.perf_counter() - started
    return outcome


def order_for_cache(jobs: list[Job]) -> list[Job]:
    """Group configs that embed the same texts next to each other (first appearance order kept)."""
    groups: dict[str, list[Job]] = {}
    for job in jobs:
        groups.setdefault(job.warm_key, []).append(job)
    return [job for group in groups.values() for job in group]


@dataclass
class LocalExecutor:
    """Runs configs one after the other in this process; with ``progress`` each stage shows its bar (items
    done, rate, time left), after ``on_start`` has said which config of how many begins."""

    progress: bool = False
    on_start: Callable[[Job], None] | None = None
    name: str = "local"

    def run(self, jobs: list[Job]) -> Iterator[tuple[Job, ComputedRun | JobFailure]]:
        for job in order_for_cache(jobs):
            if self.on_start is not None:
                self.on_start(job)
            yield job, _safe_compute(job.experiment_data, job.run_key, self.progress)

    def close(self) -> None:
        pass


class SchedulerUnreachableError(UserError, ConnectionError):
    """--scheduler names an address where no Dask scheduler answers."""


@dataclass
class DaskExecutor:
    """Runs configs on a Dask cluster: ``scheduler`` (tcp://host:port) or a LocalCluster on 127.0.0.1."""

    scheduler: str | None = None
    workers: int = 2
    progress: bool = False  # workers print nowhere the driver shows: the driver says when each config starts
    on_start: Callable[[Job], None] | None = None
    _client: Any = field(default=None, init=False, repr=False)
    _cluster: Any = field(default=None, init=False, repr=False)
    name: str = "dask"

    def __post_init__(self):
        optional_import("distributed", "--executor dask")  # missing or broken: one line, before the sweep starts
        if self.scheduler:  # before the sweep starts: seconds, not the client's 30 s of retries
            problem = endpoint_problem(self.scheduler)
            if problem:
                raise SchedulerUnreachableError(f"Dask scheduler {problem}; start it (dask scheduler) or fix "
                                                "--scheduler (tcp://host:port), or leave it out for a local cluster")

    def _connect(self):
        from distributed import Client, LocalCluster

        if self._client is None:
            if self.scheduler:
                self._client = Client(self.scheduler, timeout="30s")
            else:
                self._cluster = LocalCluster(n_workers=self.workers, threads_per_worker=1, processes=True,
                                             host="127.0.0.1", dashboard_address=None)
                self._client = Client(self._cluster)
        return self._client

    @property
    def address(self) -> str:
        return self._connect().scheduler.address

    def run(self, jobs: list[Job]) -> Iterator[tuple[Job, ComputedRun | JobFailure]]:
        from distributed import as_completed

        client = self._connect()
        pending = order_for_cache(jobs)
        warmed: set[str] = set()  # warm keys whose first config has finished
        warming: set[str] = set()
        busy_serial: set[str] = set()
        running: dict[Any, Job] = {}
        completed = as_completed()

        def submit_ready() -> None:
            for job in list(pending):
                if job.serial_key and job.serial_key in busy_serial:
                    continue
                if job.warm_key not in warmed:
                    if job.warm_key in warming:
                        continue
                    warming.add(job.warm_key)
                pending.remove(job)
                if job.serial_key:
                    busy_serial.add(job.serial_key)
                future = client.submit(_safe_compute, job.experiment_data, job.run_key, pure=False,
                                       key=f"kbench-{job.run_key}-{os.urandom(4).hex()}")
                running[future] = job
                completed.add(future)
                if self.on_start is not None:
                    self.on_start(job)

        submit_ready()
        while running:
            future = next(completed)
            job = running.pop(future)
            try:
                outcome = future.result()
            except Exception as e:  # the worker died (KilledWorker) or the result could not travel back
                outcome = JobFailure(type(e).__name__, str(e), traceback.format_exc())
            warming.discard(job.warm_key)
            warmed.add(job.warm_key)
            if job.serial_key:
                busy_serial.discard(job.serial_key)
            submit_ready()
            yield job, outcome

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        if self._cluster is not None:
            self._cluster.close()
        self._client = self._cluster = None


def make_executor(name: str, scheduler: str | None = None, workers: int = 2, progress: bool = False):
    if name == "local":
        if scheduler:
            raise ValueError("--scheduler needs --executor dask")
        return LocalExecutor(progress=progress)
    if name == "dask":
        return DaskExecutor(scheduler=scheduler, workers=workers, progress=progress)
    raise ValueError(f"--executor: unknown value {name!r}; allowed: local, dask")
