"""What protects a tracking store from its environment: a server that is not there, two processes creating
one SQLite store at once, and runs a killed process left RUNNING.

* ``check_reachable``: one TCP connection to an http(s) tracking URI with a short timeout, so an unreachable
  server costs seconds (MLflow's own client retries for minutes) and the caller can keep its results.
* ``open_store_once``: MLflow creates and migrates a new SQLite store on first use; two processes doing it at
  once, or a kill during it, left a broken ``mlflow.db``. The first use runs under an exclusive lock on
  ``<db>.lock``, and a new store is migrated under a temporary name, then renamed into place.
* ``owner_tags`` and ``mark_abandoned``: every run kbench creates carries ``kbench.owner`` (host, pid and the
  process's start time, so a reused pid is not mistaken for the owner). A later run or sweep in the same
  experiment marks KILLED each RUNNING run whose owner process on this host is gone, with ``kbench.abandoned``
  saying why. Runs owned by another host are left alone: their process cannot be checked from here.
"""
from __future__ import annotations

import errno

import fcntl
import logging
import os
import socket
from pathlib import Path

from kbench.errors import UserError, endpoint_problem
from kbench.tracking import tags as tag


class TrackingUnreachableError(UserError, ConnectionError):
    """The tracking server named by tracking.tracking_uri (or MLFLOW_TRACKING_URI) does not answer."""


def check_reachable(uri: str, timeout_s: float = 3.0) -> None:
    if uri.startswith(("http://", "https://")):
        problem = endpoint_problem(uri, timeout_s)
        if problem:
            raise TrackingUnreachableError(
                f"MLflow tracking server {problem}; start it, or set tracking.tracking_uri / MLFLOW_TRACKING_URI "
                "to a server that runs (unset, runs are logged to <workspace>/mlflow.db)")


def sqlite_path(uri: str) -> Path | None:
    return Path(uri.removeprefix("sqlite:///")) if uri.startswith("sqlite:///") else None


def open_store_once(uri: str):
    """An MlflowClient on ``uri`` (its Prompt Registry and LoggedModels in the same store); a SQLite store is opened
    under an exclusive file lock (MlflowClient opens its store when it is built, so the client is built inside the
    lock).

    A new store is migrated under a temporary name and renamed into place, so a kill mid-migration never
    leaves a half-migrated ``mlflow.db`` (MLflow then refuses it as "out-of-date"); one left by an older
    kbench is migrated to the head here."""
    from mlflow.tracking import MlflowClient

    # MLflow's SQL store logs each database error with its traceback, then raises it; kbench reports the raise in
    # one line (store_fault), so the log is noise (40 lines on a full disk). Set after mlflow's import configured it.
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)
    db = sqlite_path(uri)
    if db is None:
        return MlflowClient(tracking_uri=uri, registry_uri=uri)
    db.parent.mkdir(parents=True, exist_ok=True)
    with open(db.with_name(db.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or by the kernel if we are killed
        if not db.exists():
            migrate(db.with_name(f".{db.name}.creating"), fresh=True)
            os.replace(db.with_name(f".{db.name}.creating"), db)
        try:
            client = MlflowClient(tracking_uri=uri, registry_uri=uri)
        except Exception as e:
            if "out-of-date database schema" not in str(e):
                raise
            migrate(db, fresh=False)
            client = MlflowClient(tracking_uri=uri, registry_uri=uri)
        client.search_experiments(max_results=1)  # the store is usable before the lock goes
        return client


def migrate(db: Path, fresh: bool) -> None:
    """Every MLflow migration up to the head, on ``db`` (MLflow's own helpers, what ``mlflow db upgrade`` runs)."""
    import sqlalchemy
    from mlflow.store.db.utils import _initialize_tables, _upgrade_db

    if fresh:
        db.unlink(missing_ok=True)  # a previous creation killed half-way
    engine = sqlalchemy.create_engine(f"sqlite:///{db}")
    try:
        (_initialize_tables if fresh else _upgrade_db)(engine)
    finally:
        engine.dispose()


def process_start(pid: int) -> str:
    """The process's start time in clock ticks since boot (Linux), "" where /proc is not there."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]  # field 22 of stat, counted after the command name


def owner_tags() -> dict[str, str]:
    pid = os.getpid()
    return {tag.OWNER: f"{socket.gethostname()}:{pid}:{process_start(pid)}"}


def owner_alive(owner: str) -> bool | None:
    """True/False for an owner on this host; None when it is another host's (or not parseable)."""
    host, _, rest = owner.partition(":")
    pid_text, _, started = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return None
    pid = int(pid_text)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's live process
    return not started or process_start(pid) == started


def mark_abandoned(client, experiment_id: str) -> list[str]:
    """Mark KILLED the RUNNING runs of the experiment whose owner process on this host is gone; their ids."""
    marked = []
    for run in client.search_runs([experiment_id], "attributes.status = 'RUNNING'", max_results=1000):
        owner = run.data.tags.get(tag.OWNER, "")
        if owner and owner_alive(owner) is False:
            client.set_tag(run.info.run_id, tag.ABANDONED,
                           f"process {owner} ended while this run was RUNNING (killed mid-logging); "
                           "marked KILLED by a later run. Its results, if any, are in its run folder.")
            client.set_terminated(run.info.run_id, "KILLED")
            marked.append(run.info.run_id)
    return marked


STORE_FAULTS = {  # the first line of a SQLite tracking store's error -> what it means and what to do
    "database or disk is full": "the disk holding the tracking store is full: free space, or set "
                                "tracking.tracking_uri / MLFLOW_TRACKING_URI to a store on another disk",
    "attempt to write a readonly database": "the tracking store is read-only: make it writable, or set "
                                            "tracking.tracking_uri / MLFLOW_TRACKING_URI to another store",
    "unable to open database file": "the tracking store cannot be opened: check the path and its folder",
    "file is not a database": "the tracking store is not a SQLite database (a damaged mlflow.db?): move it "
                              "away, or set tracking.tracking_uri / MLFLOW_TRACKING_URI to another store",
}


def store_fault(error: BaseException) -> str | None:
    """What the machine did to the tracking store, for an error the user can fix; None for anything else."""
    if isinstance(error, TrackingUnreachableError):
        return str(error)
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):  # an artifact or trace copy
        return f"MLflow could not write: {STORE_FAULTS['database or disk is full']}"
    text = str(error)
    for needle, meaning in STORE_FAULTS.items():
        if needle in text:
            return f"MLflow could not write: {meaning}"
    return None
