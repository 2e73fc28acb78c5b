"""kbench ui and the console: the browse command printed after a run works as printed, and --quiet is quiet; the
port is checked as kbench label checks it, and MLflow's server ends with its command, however that ends."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from kbench.cli.ui_cmd import browse_hint, running_members, stop_group, ui_command

KBENCH = [sys.executable, "-c", "import sys; from kbench.cli import main; sys.exit(main())"]  # a fresh process: env read at import


def test_ui_serves_the_store_on_loopback_with_this_venvs_mlflow():
    command = ui_command("sqlite:////tmp/ws/mlflow.db", 5001)
    assert command[:3] == [sys.executable, "-m", "mlflow"]
    assert command[command.index("--host") + 1] == "127.0.0.1"
    assert command[command.index("--backend-store-uri") + 1] == "sqlite:////tmp/ws/mlflow.db"


def test_browse_hint_names_the_store_unless_it_is_the_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("KBENCH_WORKSPACE", raising=False)
    default = f"sqlite:///{(tmp_path / 'experiments' / 'mlflow.db').resolve()}"
    assert browse_hint(default).endswith("kbench ui")
    assert browse_hint("sqlite:////elsewhere/mlflow.db").endswith("kbench ui --tracking-uri sqlite:////elsewhere/mlflow.db")


def test_ui_without_a_store_is_one_line_and_exit_2(tmp_path):
    done = subprocess.run([*KBENCH, "ui", "--workspace", str(tmp_path / "none")], capture_output=True, text=True)
    assert done.returncode == 2 and "no MLflow store at" in done.stderr and "Traceback" not in done.stderr


def test_quiet_run_prints_no_bar_and_no_mlflow_info(tmp_path):
    # One question and the one page it points at (10 kB, 7 pages and 55 kB before: the size is not what prints);
    # the workspace's cache is fresh, so the run still embeds, loads weights and logs to MLflow: what would print a
    # bar or INFO lines. It stays a fresh process: the environment is read at import.
    dataset = {"name": "demo", "max_documents": 1, "max_queries": 1}
    config = {"name": "quiet", "workspace": str(tmp_path / "ws"), "dataset": dataset,
              "chunking": {"strategy": "fixed", "chunk_size": 600}, "retrieval": {"legs": ["vector"]}}
    path = tmp_path / "quiet.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    done = subprocess.run([*KBENCH, "run", str(path), "--quiet"], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr[-2000:]
    assert "%|" not in done.stderr and "Loading weights" not in done.stderr, done.stderr[-2000:]
    assert "INFO mlflow" not in done.stderr
    browse = next(line for line in done.stdout.splitlines() if "browse:" in line)
    assert f"ui --tracking-uri sqlite:///{tmp_path / 'ws' / 'mlflow.db'}" in browse


def test_a_server_that_stops_before_it_answers_is_reported_not_waited_for():
    from kbench.cli.ui_cmd import wait_until_answers

    said: list[str] = []
    gone = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.2)"])
    assert wait_until_answers(gone, "http://127.0.0.1:9", say=said.append, every_s=0.5, poll_s=0.1) is None
    assert said and said[0].startswith("  ... MLflow's UI is starting (")  # progress while it waited


def group_members(pgid: int) -> list[int]:
    """The processes of process group ``pgid`` still running (zombies left out)."""
    return running_members(pgid)


def children_of(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
        except OSError:
            continue
    return found


@pytest.mark.parametrize("port, words", [("-1", "give a port between 1 and 65535 (0: any free port)"),
                                         ("99999", "give a port between 1 and 65535 (0: any free port)"),
                                         ("taken", "the port is in use")])
def test_a_port_that_cannot_be_had_is_one_line_at_once(tmp_path, port, words):
    """issue 52: --port -1 printed three uvicorn tracebacks after 115 s, --port 99999 had not ended after 120 s."""
    (tmp_path / "mlflow.db").write_bytes(b"")  # a store to show: the port is what is refused
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        given = str(taken.getsockname()[1]) if port == "taken" else port
        started = time.monotonic()
        done = subprocess.run([*KBENCH, "ui", "--workspace", str(tmp_path), "--port", given], capture_output=True,
                              text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"kbench: error: --port {given}: {words}"), line
    assert time.monotonic() - started < 30  # refused by kbench, no server started


def test_stop_group_ends_the_server_and_the_workers_it_started():
    """What kbench ui does when it ends: the server leads its own group; its workers (uvicorn's) go with it."""
    tree = ("import subprocess, sys, time\n"
            "subprocess.Popen([sys.executable, '-c', 'import signal, time; "
            "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)'])\n"  # a worker deaf to SIGTERM
            "time.sleep(600)")
    server = subprocess.Popen([sys.executable, "-c", tree], process_group=0)
    deadline = time.monotonic() + 30
    while len(group_members(server.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(group_members(server.pid)) == 2
    stop_group(server, grace_s=1.0)
    assert server.returncode is not None and group_members(server.pid) == []


def test_ui_prints_its_url_once_it_answers_and_a_sigterm_ends_its_server(tmp_path):
    """issue 42 item 13: the URL came at once and the page 45 s later; now the URL line means it answers. issue 52:
    --port 0 waited forever (kbench polled port 0), and a SIGTERM to kbench ui (what `timeout` and service managers
    send) left MLflow's server answering with parent 1; now the port given is the one bound, and the server's
    process group ends with the command.

    Stays slow: the real MLflow server has to start and answer (one worker importing MLflow; 30-40 s on 2 busy
    cores), since that moment is what the test checks."""
    import urllib.request

    from mlflow.tracking import MlflowClient

    MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}").search_experiments()  # a store to show
    ui = subprocess.Popen([*KBENCH, "ui", "--workspace", str(tmp_path), "--port", "0"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    server = None
    try:
        first = ui.stdout.readline()
        assert first.startswith("starting MLflow's UI for sqlite:///") and " on port " in first, first
        port = int(first.split(" on port ", 1)[1].split()[0])
        assert port > 0
        line = ui.stdout.readline()
        while line.startswith("  ... MLflow's UI is starting"):
            line = ui.stdout.readline()
        assert line.startswith("MLflow UI for ") and f"http://127.0.0.1:{port} (answered after" in line, line
        assert urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10).read()  # it answers now
        (server,) = children_of(ui.pid)
        assert len(group_members(server)) >= 2  # MLflow's process and the uvicorn worker it started
        ui.send_signal(signal.SIGTERM)
        assert ui.wait(timeout=60) == 0
    finally:
        if ui.poll() is None:
            ui.kill()
            ui.wait()
        if server is not None and group_members(server):
            os.killpg(server, signal.SIGKILL)
    assert group_members(server) == []  # nothing of it is left
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0  # and nothing answers on its port
