"""kbench ui [--workspace DIR | --tracking-uri URI] [--port N]: MLflow's UI on 127.0.0.1 for a workspace's store.

It runs this venv's MLflow (``python -m mlflow ui``), so it works whether or not ``mlflow`` is on PATH, and
binds to 127.0.0.1 only. The URL is printed once the server answers (about 45 s on 2 busy cores), with a progress
line every few seconds before; a server that stops before it answers (a port in use) is one error line. Ctrl-C
stops it. One server worker (MLflow starts four by default, each importing
MLflow: about 50 s on 2 busy cores before the page answers, for a UI one person reads), no access log, and the one
deprecation MLflow's own server module raises on import (Starlette's WSGI middleware) filtered by its text.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable

from kbench.cli import add_command
from kbench.paths import tracking_uri, workspace_dir

DEFAULT_PORT = 5000


def add_parser(sub) -> None:
    p = add_command(sub, "ui")
    p.add_argument("--workspace", default="experiments",
                   help="the workspace whose mlflow.db to show (default: experiments, or KBENCH_WORKSPACE)")
    p.add_argument("--tracking-uri", help="an MLflow store instead (default: MLFLOW_TRACKING_URI or "
                                          "<workspace>/mlflow.db)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port on 127.0.0.1 (default {DEFAULT_PORT})")
    p.set_defaults(func=run)


# What MLflow's server prints that is not for the person at the terminal: known by its text, filtered in the server's
# processes only (PYTHONWARNINGS reaches the workers uvicorn spawns).
KNOWN_WARNINGS = ("ignore:starlette.middleware.wsgi is deprecated",)


def ui_command(uri: str, port: int = DEFAULT_PORT) -> list[str]:
    """The command line that serves ``uri`` on 127.0.0.1:``port`` with this interpreter's MLflow."""
    return [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri, "--registry-store-uri", uri,
            "--host", "127.0.0.1", "--port", str(port), "--workers", "1", "--uvicorn-opts", "--log-level warning"]


def ui_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The server's environment: the caller's, with MLflow's INFO lines and its known import warning left out."""
    env = dict(os.environ if environ is None else environ)
    env.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
    env["PYTHONWARNINGS"] = ",".join(filter(None, [env.get("PYTHONWARNINGS", ""), *KNOWN_WARNINGS]))
    return env


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
    if answers(f"http://127.0.0.1:{args.port}"):
        print(f"kbench: error: something already answers on http://127.0.0.1:{args.port}; stop it or pass --port N",
              file=sys.stderr)
        return 2
    print(f"starting MLflow's UI for {uri} on port {args.port} (about 45 s on a busy 2-core machine) ...", flush=True)
    server = subprocess.Popen(ui_command(uri, args.port), env=ui_environment())
    try:
        took = wait_until_answers(server, f"http://127.0.0.1:{args.port}",
                                  say=lambda line: print(line, flush=True))
        if took is None:
            print(f"kbench: error: MLflow's UI stopped (exit {server.returncode}) before it answered on port "
                  f"{args.port}; its message is above (a port in use: pass --port N)", file=sys.stderr)
            return 2
        print(f"MLflow UI for {uri}: http://127.0.0.1:{args.port} (answered after {took:.0f} s; Ctrl-C stops it)",
              flush=True)
        return server.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        if server.poll() is None:
            server.terminate()
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                server.kill()


def answers(url: str) -> bool:
    """Does an HTTP server answer at ``url`` (any status counts: it is up)?"""
    try:
        urllib.request.urlopen(f"{url}/health", timeout=2).close()
        return True
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):
        return False


def wait_until_answers(process: subprocess.Popen, url: str, say: Callable[[str], None], every_s: float = 5.0,
                       poll_s: float = 0.5) -> float | None:
    """Seconds until the server ``process`` started answers at ``url``, saying how long so far every ``every_s``;
    None when the process ends first."""
    started = time.monotonic()
    next_note = every_s
    while process.poll() is None:
        if answers(url):
            return time.monotonic() - started
        elapsed = time.monotonic() - started
        if elapsed >= next_note:
            say(f"  ... MLflow's UI is starting ({elapsed:.0f} s)")
            next_note += every_s
        time.sleep(poll_s)
    return None
