"""kbench ui [--workspace DIR | --tracking-uri URI] [--port N]: MLflow's UI on 127.0.0.1 for a workspace's store.

It runs this venv's MLflow (``python -m mlflow ui``), so it works whether or not ``mlflow`` is on PATH, and
binds to 127.0.0.1 only. Ctrl-C stops it.
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from kbench.paths import workspace_dir
from kbench.tracking.mlflow_run import tracking_uri

DEFAULT_PORT = 5000


def add_parser(sub) -> None:
    p = sub.add_parser("ui", help="start MLflow's UI on 127.0.0.1 for the workspace's runs (Ctrl-C stops it)")
    p.add_argument("--workspace", default="experiments",
                   help="the workspace whose mlflow.db to show (default: experiments, or KBENCH_WORKSPACE)")
    p.add_argument("--tracking-uri", help="an MLflow store instead (default: MLFLOW_TRACKING_URI or "
                                          "<workspace>/mlflow.db)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port on 127.0.0.1 (default {DEFAULT_PORT})")
    p.set_defaults(func=run)


def ui_command(uri: str, port: int = DEFAULT_PORT) -> list[str]:
    """The command line that serves ``uri`` on 127.0.0.1:``port`` with this interpreter's MLflow."""
    return [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri, "--host", "127.0.0.1",
            "--port", str(port)]


def kbench_program() -> str:
    """How to call this kbench again: ``kbench`` when that is the one on PATH, else its path (e.g. .venv/bin/kbench)."""
    mine = Path(sys.executable).parent / "kbench"
    on_path = shutil.which("kbench")
    if on_path and Path(on_path).resolve() == mine.resolve():
        return "kbench"
    try:
        return str(mine.relative_to(Path.cwd()))
    except ValueError:
        return str(mine)


def browse_hint(uri: str) -> str:
    """The command a person copies to see a run: ``kbench ui``, with the store when it is not the default one."""
    default = tracking_uri(None, workspace_dir())
    return f"{kbench_program()} ui" + ("" if uri == default else f" --tracking-uri {uri}")


def run(args) -> int:
    uri = tracking_uri(args.tracking_uri, workspace_dir(args.workspace))
    if uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///"):]).is_file():
        print(f"kbench: error: no MLflow store at {uri[len('sqlite:///'):]}; run an experiment first "
              "(kbench run configs/quickstart.yaml) or pass --workspace / --tracking-uri", file=sys.stderr)
        return 2
    print(f"MLflow UI for {uri} on http://127.0.0.1:{args.port} (Ctrl-C stops it)", flush=True)
    command = ui_command(uri, args.port)
    os.execv(command[0], command)
    return 0  # not reached: exec replaces this process
