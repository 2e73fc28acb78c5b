"""The machine, not the config: a workspace that is a file or read-only, a full disk, endpoints, tracking servers
and schedulers that do not answer. Each ends with exit 2 and one line naming what is wrong, nothing
half-written, and finished results kept and pointed at.

Read-only and full file systems are real: a small tmpfs mounted in a private mount namespace (``unshare -m``,
root only; the tests skip elsewhere and say so). A full disk is made by filling the tmpfs up to what is
left for the step under test, after a first run has warmed the workspace's cache.
"""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from kbench.errors import ConfigError
from kbench.tracking.run_folder import WORKSPACE_FOLDERS, check_workspace
from tests.reliability.inputs import (DEMO, KBENCH, assert_nothing_written, config, error_lines, run_kbench,
                                      write_yaml)

CLOSED = "127.0.0.1:9"  # the discard port: nothing listens on it here


def can_mount() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
                          capture_output=True).returncode == 0


needs_mount = pytest.mark.skipif(not can_mount(), reason="needs root and unshare -m to mount a small tmpfs")


def bm25_config(tmp_path: Path, workspace: Path, **sections) -> Path:
    return write_yaml(tmp_path / "c.yaml", config(workspace, {"path": str(DEMO)}, **sections))


def in_tmpfs(tmp_path: Path, workspace: Path, script: str, size: str = "4m", options: str = "") -> str:
    """Run ``script`` (sh) in a private mount namespace where ``workspace`` is a fresh tmpfs; its output."""
    workspace.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "KBENCH_WORKSPACE"}
    mount = f"mount -t tmpfs -o size={size}{options} tmpfs {shlex.quote(str(workspace))}"
    done = subprocess.run(["unshare", "-m", "sh", "-c", f"set -u; {mount} && {script}"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def kbench_line(args: str) -> str:
    """sh: run kbench, print its stderr's error lines and exit code between markers."""
    return (f"{shlex.quote(str(KBENCH))} {args} > out.txt 2> err.txt; echo \"rc=$?\"; "
            "echo '--out'; cat out.txt; echo '--err'; grep '^kbench: error:' err.txt; grep -c Traceback err.txt; "
            "echo '--end'")


def parse(stdout: str) -> tuple[int, str, list[str], int]:
    rc_line = next(line for line in stdout.splitlines() if line.startswith("rc="))
    out = stdout.split("--out\n", 1)[1].split("--err\n", 1)[0]
    err = stdout.split("--err\n", 1)[1].split("--end", 1)[0].strip().splitlines()
    return int(rc_line[3:]), out, err[:-1], int(err[-1])


def listing(root: str) -> str:
    return f"echo '--files'; cd {shlex.quote(root)} && find . -mindepth 1 | sort; cd - >/dev/null"


def files_of(stdout: str) -> list[str]:
    return stdout.split("--files\n", 1)[1].split()


# ------------------------------------------------------------------ the workspace itself
def test_a_workspace_that_is_a_file_exits_2_and_leaves_the_file(tmp_path):
    workspace = tmp_path / "ws"
    workspace.write_text("my notes\n")
    done = run_kbench("run", str(bm25_config(tmp_path, workspace)), "--quiet", cwd=tmp_path)
    assert done.code == 2 and error_lines(done.err) == [
        f"kbench: error: workspace {workspace} is not a folder; move that file away or set workspace "
        "(or KBENCH_WORKSPACE) to a writable folder"], done.err[-2000:]
    assert workspace.read_text() == "my notes\n"


def test_a_workspace_below_a_file_names_the_file(tmp_path):
    blocker = tmp_path / "data"
    blocker.write_text("x")
    done = run_kbench("run", str(bm25_config(tmp_path, blocker / "ws")), "--quiet", cwd=tmp_path)
    assert done.code == 2
    (line,) = error_lines(done.err)
    assert f"(its parent {blocker} is a file)" in line and "Traceback" not in done.err


def test_a_sweep_in_a_workspace_that_is_a_file_exits_2(tmp_path):
    workspace = tmp_path / "ws"
    workspace.write_text("")
    cfg = config(workspace, {"path": str(DEMO)}, sweep={"chunking.chunk_size": [300, 400]})
    done = run_kbench("sweep", str(write_yaml(tmp_path / "s.yaml", cfg)), cwd=tmp_path)
    assert done.code == 2 and "is not a folder" in "".join(error_lines(done.err)), done.err[-2000:]
    assert workspace.read_text() == ""


@pytest.mark.parametrize("folder", ["runs", "cache"])
def test_a_file_where_the_workspace_keeps_a_folder_exits_2_before_any_work(tmp_path, folder):
    """A file named ``runs`` failed after the whole run with a FileExistsError traceback; ``cache`` with a bare
    "Not a directory". Both are refused up front, the file left as it was."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / folder).write_text("my notes\n")
    done = run_kbench("run", str(bm25_config(tmp_path, workspace)), "--quiet", cwd=tmp_path)
    assert done.code == 2 and error_lines(done.err) == [
        f"kbench: error: workspace {workspace}: {workspace / folder} is a file where kbench keeps its {folder} "
        "folder; move that file away or set workspace (or KBENCH_WORKSPACE) to a writable folder"], done.err[-2000:]
    assert sorted(p.name for p in workspace.iterdir()) == [folder]
    assert (workspace / folder).read_text() == "my notes\n"


@pytest.mark.parametrize("folder", WORKSPACE_FOLDERS)
def test_check_workspace_names_each_folder_that_is_a_file(tmp_path, folder):
    (tmp_path / folder).write_text("")
    with pytest.raises(ConfigError, match=f"{tmp_path / folder} is a file where kbench keeps its {folder} folder"):
        check_workspace(tmp_path)


@needs_mount
def test_a_read_only_workspace_exits_2_before_any_work(tmp_path):
    workspace = tmp_path / "ws"
    out = in_tmpfs(tmp_path, workspace, kbench_line(f"run {bm25_config(tmp_path, workspace)} --quiet") + "; "
                   + listing(str(workspace)), options=",ro")
    code, _, errors, tracebacks = parse(out)
    assert code == 2 and tracebacks == 0
    assert errors == [f"kbench: error: workspace {workspace}: {workspace} is read-only; set workspace "
                      "(or KBENCH_WORKSPACE) to a writable folder"]
    assert files_of(out) == []


# ------------------------------------------------------------------ a full disk, at three moments
@needs_mount
def test_a_disk_full_while_caching_chunks_exits_2_and_leaves_no_torn_file(tmp_path):
    workspace = tmp_path / "ws"
    out = in_tmpfs(tmp_path, workspace, kbench_line(f"run {bm25_config(tmp_path, workspace)} --quiet") + "; "
                   + listing(str(workspace)), size="64k")
    code, _, errors, tracebacks = parse(out)
    assert code == 2 and tracebacks == 0
    assert errors == ["kbench: error: No space left on device; the disk is full: free space or set workspace "
                      "(or KBENCH_WORKSPACE) to another folder on another disk"]
    files = files_of(out)
    assert not [f for f in files if "/.tmp-" in f or "runs/" in f or f.endswith(".json") and f.count("/") > 4]
    assert "./mlflow.db" not in files


def fill_leaving(workspace: Path, kilobytes: int) -> str:
    """sh: fill the tmpfs with one file until ``kilobytes`` are left."""
    ws = shlex.quote(str(workspace))
    return (f"avail=$(df --output=avail -k {ws} | tail -1); "
            f"head -c $(( (avail - {kilobytes}) * 1024 )) /dev/zero > {ws}/filler")


@needs_mount
def test_a_disk_full_while_writing_the_run_folder_leaves_no_folder(tmp_path):
    workspace = tmp_path / "ws"
    cfg = bm25_config(tmp_path, workspace)
    warm = f"{shlex.quote(str(KBENCH))} run {cfg} --quiet --no-log > /dev/null 2>&1; rm -rf {workspace}/runs"
    out = in_tmpfs(tmp_path, workspace, f"{warm}; {fill_leaving(workspace, 24)}; "
                   + kbench_line(f"run {cfg} --quiet --no-log") + "; " + listing(str(workspace)))
    code, _, errors, tracebacks = parse(out)
    assert code == 2 and tracebacks == 0, out
    assert len(errors) == 1 and "No space left on device" in errors[0] and "the disk is full" in errors[0]
    assert [f for f in files_of(out) if f.startswith("./runs/")] == []  # no folder, not even a .partial- one


@needs_mount
def test_a_disk_full_while_logging_to_mlflow_keeps_and_prints_the_results(tmp_path):
    workspace = tmp_path / "ws"
    cfg = bm25_config(tmp_path, workspace)
    warm = f"{shlex.quote(str(KBENCH))} run {cfg} --quiet --no-log > /dev/null 2>&1; rm -rf {workspace}/runs"
    # room for the run folder (about 300 KB with its plots and results table), not for MLflow's store and the
    # artifact copies after it
    out = in_tmpfs(tmp_path, workspace, f"{warm}; {fill_leaving(workspace, 480)}; "
                   + kbench_line(f"run {cfg} --quiet") + "; " + listing(str(workspace)))
    code, printed, errors, tracebacks = parse(out)
    assert code == 2 and tracebacks == 0, out
    (run_dir,) = {f.split("/")[2] for f in files_of(out) if f.startswith("./runs/") and f.count("/") >= 2}
    assert not run_dir.startswith(".partial-")
    assert {f"./runs/{run_dir}/{name}" for name in ("config.yaml", "metrics.json", "per_query.parquet")} \
        <= set(files_of(out))
    assert "recall" in printed and f"results: {workspace}/runs/{run_dir}" in printed
    assert errors == [f"kbench: error: MLflow could not write: the disk holding the tracking store is full: free "
                      "space, or set tracking.tracking_uri / MLFLOW_TRACKING_URI to a store on another disk. "
                      f"Not logged to MLflow; the results are in {workspace}/runs/{run_dir}"]


@needs_mount
def test_a_disk_full_under_an_existing_tracking_store_is_one_line_without_sqlalchemy_noise(tmp_path):
    """MLflow's SQL store logged each database error with its 40-line traceback (its SQL and parameters too)
    before kbench's one line; the error is still raised and reported once."""
    workspace = tmp_path / "ws"
    cfg = bm25_config(tmp_path, workspace)
    warm = f"{shlex.quote(str(KBENCH))} run {cfg} --quiet > /dev/null 2>&1; rm -rf {workspace}/runs"  # logs too
    # 8 MB: the warm run's store (its traces included) must fit whole before the disk is filled
    out = in_tmpfs(tmp_path, workspace, f"{warm}; {fill_leaving(workspace, 600)}; "
                   f"{shlex.quote(str(KBENCH))} run {cfg} --quiet > out.txt 2> err.txt; echo \"rc=$?\"; "
                   "echo '--err'; cat err.txt", size="8m")
    code = int(out.split("rc=", 1)[1].split()[0])
    stderr = out.split("--err\n", 1)[1].strip()
    assert code == 2, out
    assert stderr.startswith("kbench: error: MLflow could not write: the disk holding the tracking store is full")
    assert len(stderr.splitlines()) == 1, stderr  # no "SQLAlchemy database error", no traceback, no SQL


# ------------------------------------------------------------------ servers that do not answer
@pytest.mark.parametrize("uri, problem", [
    (f"http://{CLOSED}", f"refuses connections (nothing listens on {CLOSED})"),
    ("http://127.0.0.1:notaport", "has no valid port"),
    ("https://kbench-no-such-host.invalid", "cannot be reached"),
])
def test_an_unreachable_tracking_server_prints_results_then_says_so(tmp_path, uri, problem):
    workspace = tmp_path / "ws"
    done = run_kbench("run", str(bm25_config(tmp_path, workspace, tracking={"experiment": "r", "tracking_uri": uri})),
                      "--quiet", cwd=tmp_path, timeout=120)
    assert done.code == 2, done.err[-2000:]
    (run_dir,) = (workspace / "runs").iterdir()
    assert (run_dir / "per_query.parquet").is_file() and f"results: {run_dir}" in done.out
    (line,) = error_lines(done.err)
    assert line.startswith(f"kbench: error: MLflow tracking server {uri} {problem}") and str(run_dir) in line
    assert "Traceback" not in done.err and not (workspace / "mlflow.db").exists()


def test_a_tracking_store_that_is_not_a_database_keeps_the_results(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "mlflow.db").write_bytes(b"this is not sqlite" * 100)
    done = run_kbench("run", str(bm25_config(tmp_path, workspace)), "--quiet", cwd=tmp_path)
    assert done.code == 2, done.err[-2000:]
    (run_dir,) = (workspace / "runs").iterdir()
    (line,) = error_lines(done.err)
    assert "the tracking store is not a SQLite database" in line and str(run_dir) in line
    assert (workspace / "mlflow.db").read_bytes() == b"this is not sqlite" * 100


@pytest.mark.parametrize("section", ["enrichment", "embedding"])
def test_an_llm_or_embedding_endpoint_that_refuses_connections_exits_2_naming_base_url(tmp_path, section):
    workspace = tmp_path / "ws"
    url = f"http://{CLOSED}/v1"
    sections = {"retrieval": {"legs": ["vector"], "top_k": 10}}
    if section == "enrichment":
        sections["enrichment"] = {"enabled": True, "base_url": url, "model": "m", "api_key_env": "KBENCH_TEST_KEY"}
    else:
        sections["embedding"] = {"provider": "openai", "model": "text-embedding-3-small", "base_url": url,
                                 "api_key_env": "KBENCH_TEST_KEY"}
    os.environ["KBENCH_TEST_KEY"] = "not-a-real-key"
    try:
        done = run_kbench("run", str(bm25_config(tmp_path, workspace, **sections)), "--quiet", cwd=tmp_path,
                          timeout=120)
    finally:
        del os.environ["KBENCH_TEST_KEY"]
    assert done.code == 2, done.err[-2000:]
    (line,) = error_lines(done.err)
    # an LLM stage's endpoint is probed before the dataset is read (pipeline.preflight); an embedding endpoint
    # is met by the first batch, and kbench.llm's client stops the stage at once
    start = f"kbench: error: {section}: " + ("cannot connect to " if section == "enrichment" else "stopped after 0 of ")
    assert line.startswith(start) and \
        f"cannot connect to {url} (ConnectError" in line and f"or fix {section}.base_url" in line, line
    assert "Traceback" not in done.err
    assert not (workspace / "runs").exists() and not (workspace / "mlflow.db").exists()
    assert not [p for p in workspace.rglob(".tmp-*")]


def test_an_unreachable_dask_scheduler_exits_2_before_any_run_is_logged(tmp_path):
    workspace = tmp_path / "ws"
    cfg = config(workspace, {"path": str(DEMO)}, sweep={"chunking.chunk_size": [300, 400]})
    done = run_kbench("sweep", str(write_yaml(tmp_path / "s.yaml", cfg)), "--executor", "dask", "--scheduler",
                      f"tcp://{CLOSED}", cwd=tmp_path, timeout=120)
    assert done.code == 2, done.err[-2000:]
    assert error_lines(done.err) == [
        f"kbench: error: Dask scheduler tcp://{CLOSED} refuses connections (nothing listens on {CLOSED}); start it "
        "(dask scheduler) or fix --scheduler (tcp://host:port), or leave it out for a local cluster"]
    assert_nothing_written(workspace)
