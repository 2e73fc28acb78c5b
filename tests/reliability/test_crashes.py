"""Crashes and neighbours: runs started together on a new workspace, processes killed with SIGKILL, and what
the next run or sweep finds and repairs. Everything here runs the real ``kbench`` command or real processes
killed for real; nothing is simulated."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
from mlflow.tracking import MlflowClient

from kbench.cache import STALE_TEMP_SECONDS, TMP_PREFIX, EmbeddingCache
from kbench.sweep import expand_sweep, run_sweep
from kbench.tracking import tags as tag
from kbench.tracking.guard import owner_tags
from kbench.tracking.run_folder import PARTIAL, write_complete
from tests.reliability.inputs import DEMO, KBENCH, config, write_yaml


def client_of(workspace: Path) -> MlflowClient:
    return MlflowClient(f"sqlite:///{workspace / 'mlflow.db'}")


def all_runs(workspace: Path, experiment: str = "reliability"):
    client = client_of(workspace)
    found = client.get_experiment_by_name(experiment)
    return client.search_runs([found.experiment_id], max_results=1000) if found else []


def test_two_runs_started_together_on_a_new_workspace_both_log(tmp_path):
    """MLflow creates and migrates a new mlflow.db on first use; two processes doing it at once broke it (alembic:
    "expected to match one row when updating ... in 'alembic_version'"). Now one creates it, the other waits."""
    workspace = tmp_path / "ws"
    procs = []
    for n in range(2):
        cfg = write_yaml(tmp_path / f"c{n}.yaml", config(workspace, {"path": str(DEMO)}, name=f"together-{n}"))
        procs.append(subprocess.Popen([str(KBENCH), "run", str(cfg), "--quiet"], cwd=tmp_path, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    assert [code for code, _ in results] == [0, 0], [err[-2000:] for _, err in results]
    runs = all_runs(workspace)
    assert sorted(r.info.run_name for r in runs) == ["together-0", "together-1"]
    assert {r.info.status for r in runs} == {"FINISHED"}
    assert all("doc_recall_at_5" in r.data.metrics for r in runs)
    client = client_of(workspace)  # the store they made takes the next run
    later = client.create_run(runs[0].info.experiment_id, run_name="later").info.run_id
    client.set_terminated(later, "FINISHED")
    assert len(all_runs(workspace)) == 3


KILLED_MID_LOGGING = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from kbench.tracking.guard import owner_tags
    from kbench.tracking.mlflow_run import ensure_experiment, mlflow_client
    workspace = Path(sys.argv[1])
    client = mlflow_client(None, workspace)
    run = client.create_run(ensure_experiment(client, "reliability", workspace), run_name="killed",
                            tags=owner_tags())
    client.log_metric(run.info.run_id, "doc_recall_at_5", 0.5)  # metrics logged, artifacts not yet
    print(run.info.run_id, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
""")


def test_a_run_left_running_by_a_killed_process_is_marked_killed_by_the_next_run(tmp_path):
    workspace = tmp_path / "ws"
    done = subprocess.run([sys.executable, "-c", KILLED_MID_LOGGING, str(workspace)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    killed_id = done.stdout.strip()
    client = client_of(workspace)
    experiment_id = client.get_run(killed_id).info.experiment_id
    alive = client.create_run(experiment_id, run_name="alive", tags=owner_tags()).info.run_id  # this process
    elsewhere = client.create_run(experiment_id, run_name="elsewhere",
                                  tags={tag.OWNER: "another-host:1:1"}).info.run_id
    assert client.get_run(killed_id).info.status == "RUNNING"

    cfg = write_yaml(tmp_path / "c.yaml", config(workspace, {"path": str(DEMO)}))
    run = subprocess.run([str(KBENCH), "run", str(cfg), "--quiet"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    killed = client.get_run(killed_id)
    assert killed.info.status == "KILLED"
    assert killed.data.tags[tag.ABANDONED].startswith("process ") and "killed mid-logging" in \
        killed.data.tags[tag.ABANDONED]
    assert client.get_run(alive).info.status == "RUNNING"  # its process (this test) is alive
    assert client.get_run(elsewhere).info.status == "RUNNING"  # another host's: cannot be checked from here
    for run_id in (alive, elsewhere):
        client.set_terminated(run_id, "FINISHED")


class FailingExecutor:
    """A real executor's interface whose cluster dies after the sweep started (what a lost Dask cluster does)."""

    name = "failing"

    def run(self, jobs):
        raise OSError("the cluster went away")
        yield  # pragma: no cover

    def close(self):
        pass


def test_a_sweep_whose_executor_fails_leaves_its_parent_failed_not_running(tmp_path):
    workspace = tmp_path / "ws"
    data = config(workspace, {"path": str(DEMO)}, sweep={"chunking.chunk_size": [300, 400]})
    data["name"] = "failing-sweep"
    try:
        run_sweep(expand_sweep(data), FailingExecutor(), report=False, say=lambda line: None)
    except OSError as e:
        assert str(e) == "the cluster went away"
    else:
        raise AssertionError("the executor's failure must reach the caller")
    (parent,) = all_runs(workspace)
    assert parent.info.status == "FAILED"
    assert parent.data.tags[tag.ERROR] == "OSError: the cluster went away"


def test_a_run_folder_a_killed_process_left_half_written_is_removed_by_the_next_write(tmp_path):
    runs = tmp_path / "runs"
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    abandoned = runs / f"{PARTIAL}{dead.stdout.strip()}-20261124T000000Z-x-abc"
    in_flight = runs / f"{PARTIAL}{child.pid}-20261124T000000Z-y-abc"
    for folder in (abandoned, in_flight):
        folder.mkdir(parents=True)
        (folder / "metrics.json").write_text("{")
    try:
        written = write_complete(runs / "20261124T000001Z-z-abc", lambda f: (f / "metrics.json").write_text("{}"))
        assert sorted(p.name for p in runs.iterdir()) == sorted([in_flight.name, written.name])
    finally:
        child.kill()
        child.wait()



def test_a_tracking_store_left_half_migrated_is_migrated_by_the_next_run(tmp_path):
    """What a kill during MLflow's first migration left (before kbench created stores under a temporary name):
    mlflow.db at an intermediate schema version, which MLflow refuses as "out-of-date". The next run migrates it."""
    import sqlalchemy
    from alembic import command
    from mlflow.store.tracking.dbmodels.initial_models import Base as InitialBase
    from mlflow.store.db.utils import _get_alembic_config

    workspace = tmp_path / "ws"
    workspace.mkdir()
    db = workspace / "mlflow.db"
    engine = sqlalchemy.create_engine(f"sqlite:///{db}")
    InitialBase.metadata.create_all(engine)  # what MLflow's first use does, then the migrations
    with engine.begin() as connection:
        alembic = _get_alembic_config(str(engine.url))
        alembic.attributes["connection"] = connection
        command.upgrade(alembic, "75868b020152")  # the version the kill test's SIGKILL left behind
    engine.dispose()
    cfg = write_yaml(tmp_path / "c.yaml", config(workspace, {"path": str(DEMO)}))
    done = subprocess.run([str(KBENCH), "run", str(cfg), "--quiet"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (run,) = all_runs(workspace)
    assert run.info.status == "FINISHED"



HELD_WRITER = textwrap.dedent("""
    import os, sys, time
    import numpy as np
    from kbench import cache

    def held(src, dst):  # the shard is written and fsynced; stop before the rename, where a kill leaves a temp file
        print(src, flush=True)
        time.sleep(600)

    os.replace = held
    cache.EmbeddingCache(sys.argv[1], {"model": "held"}).put_many(["a" * 64], np.ones((1, 4), np.float32))
""")


def test_a_cache_temp_file_a_killed_writer_left_is_removed_and_a_live_writers_never(tmp_path):
    """A SIGKILL between a shard's temp file and its rename leaves ``.tmp-<host>-<pid>-*``: the next process that
    reads that cache folder removes it once its writer is dead, never while it is alive, also when the file names
    another host (only an hour's age counts there) or has no owner in its name (an older kbench's)."""
    root = tmp_path / "cache"
    writer = subprocess.Popen([sys.executable, "-c", HELD_WRITER, str(root)], stdout=subprocess.PIPE, text=True)
    try:
        held = Path(writer.stdout.readline().strip())
        assert held.name.startswith(TMP_PREFIX) and held.stat().st_size > 0
        folder = held.parent
        other_host = folder / f"{TMP_PREFIX}00000000-{writer.pid}-x.npz"  # a worker elsewhere, maybe alive
        unowned, old = folder / f"{TMP_PREFIX}abc.npz", folder / f"{TMP_PREFIX}def.npz"
        for path in (other_host, unowned, old):
            path.write_bytes(b"half a shard")
        hour_ago = held.stat().st_mtime - STALE_TEMP_SECONDS - 60
        os.utime(old, (hour_ago, hour_ago))

        assert EmbeddingCache(root, {"model": "held"}).get_many(["a" * 64]) == {}  # a temp file is never read
        assert sorted(p.name for p in folder.glob(f"{TMP_PREFIX}*")) == sorted(
            p.name for p in (held, other_host, unowned))  # only the hour-old one went
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait()
        writer.stdout.close()

    cache = EmbeddingCache(root, {"model": "held"})
    assert cache.get_many(["a" * 64]) == {}
    assert sorted(p.name for p in folder.glob(f"{TMP_PREFIX}*")) == sorted(p.name for p in (other_host, unowned))
    cache.put_many(["a" * 64], np.ones((1, 4), np.float32))  # the next writer finishes the shard
    assert EmbeddingCache(root, {"model": "held"}).get_many(["a" * 64])["a" * 64].tolist() == [1, 1, 1, 1]
