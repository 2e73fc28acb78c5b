"""kbench ui and the console: the browse command printed after a run works as printed, and --quiet is quiet."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from kbench.cli.ui_cmd import browse_hint, ui_command

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


def test_ui_prints_its_url_once_it_answers_with_progress_before(tmp_path):
    """issue 42 item 13: the URL came at once and the page 45 s later; now the URL line means it answers.

    Stays slow: the real MLflow server has to start and answer (one worker importing MLflow; 30-40 s on 2 busy
    cores), since that moment is what the test checks."""
    import signal
    import socket
    import urllib.request

    from mlflow.tracking import MlflowClient

    MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}").search_experiments()  # a store to show
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ui = subprocess.Popen([*KBENCH, "ui", "--workspace", str(tmp_path), "--port", str(port)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = ui.stdout.readline()
        assert first.startswith("starting MLflow's UI for sqlite:///") and f"port {port}" in first
        line = ui.stdout.readline()
        while line.startswith("  ... MLflow's UI is starting"):
            line = ui.stdout.readline()
        assert line.startswith("MLflow UI for ") and f"http://127.0.0.1:{port} (answered after" in line, line
        assert urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10).read()  # it answers now
    finally:
        ui.send_signal(signal.SIGINT)
        ui.wait(timeout=30)
    assert ui.returncode == 0
