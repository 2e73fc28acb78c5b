"""kbench ui [--workspace DIR | --tracking-uri URI] [--port N]: MLflow's UI on 127.0.0.1 for a workspace's store.

It runs this venv's MLflow (``python -m mlflow ui``), so it works whether or not ``mlflow`` is on PATH, and
binds to 127.0.0.1 only. ``--port`` is checked as ``kbench label`` checks it (1-65535, or 0: a free port, found by
binding it here and handed to MLflow) and bound here first, so a port in use is one line at once. The URL is
printed once the server answers (about 45 s on 2 busy cores), with a progress line every few seconds before; a
server that stops before it answers is one error line. MLflow's server runs in a process group of its own, ended
with everything in it when ``kbench ui`` ends: Ctrl-C, a SIGTERM (``timeout``, a service manager) or a SIGHUP never
leave it answering without its command. One server worker (MLflow starts four by default, each importing
MLflow: about 50 s on 2 busy cores before the page answers, for a UI one person reads), no access log, and the one
deprecation MLflow's own server module raises on import (Starlette's WSGI middleware) filtered by its text.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable

from kbench.cli import add_command
from kbench.packages import require
from kbench.paths import tracking_uri, workspace_dir
from kbench.ports import bind_fix, port_problem

DEFAULT_PORT = 5000


def add_parser(sub) -> None:
    p = add_command(sub, "ui")
    p.add_argument("--workspace", default="experiments",
                   help="the workspace whose mlflow.db to show (default: experiments, or KBENCH_WORKSPACE)")
    p.add_argument("--tracking-uri", help="an MLflow store instead (default: MLFLOW_TRACKING_URI or "
                                          "<workspace>/mlflow.db)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help=f"port on 127.0.0.1 (default {DEFAULT_PORT}; 0: any free port, printed)")
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
    if port_problem(args.port):  # before anything starts
        print(f"kbench: error: {port_problem(args.port)}", file=sys.stderr)
        return 2
    uri = tracking_uri(args.tracking_uri, workspace_dir(args.workspace))
    if uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///"):]).is_file():
        print(f"kbench: error: no MLflow store at {uri[len('sqlite:///'):]}; run an experiment first "
              "(kbench run configs/quickstart.yaml) or pass --workspace / --tracking-uri", file=sys.stderr)
        return 2
    try:
        port = bind_port(args.port)
    except OSError as e:
        print(f"kbench: error: --port {args.port}: {bind_fix(e, 'another kbench ui or MLflow server') or e.strerror or e}", file=sys.stderr)
        return 2
    require(("mlflow",), "kbench ui")  # a broken MLflow is one line here, not a traceback from its server
    print(f"starting MLflow's UI for {uri} on port {port} (about 45 s on a busy 2-core machine) ...", flush=True)
    # a group of its own: the server and the workers it starts end together, from here (stop_group), and a Ctrl-C
    # at the terminal reaches kbench ui alone, which then ends them
    server = subprocess.Popen(ui_command(uri, port), env=ui_environment(), process_group=0)
    previous = {signum: signal.signal(signum, _stop) for signum in (signal.SIGTERM, signal.SIGHUP)}
    try:
        took = wait_until_answers(server, f"http://127.0.0.1:{port}", say=lambda line: print(line, flush=True))
        if took is None:
            print(f"kbench: error: MLflow's UI stopped (exit {server.returncode}) before it answered on port "
                  f"{port}; its message is above", file=sys.stderr)
            return 2
        print(f"MLflow UI for {uri}: http://127.0.0.1:{port} (answered after {took:.0f} s; Ctrl-C stops it)",
              flush=True)
        return server.wait()
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM / SIGHUP (_stop): stopped as asked
        return 0
    finally:
        stop_group(server)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def bind_port(port: int) -> int:
    """``port`` once this process could bind 127.0.0.1:``port`` (0: the free port the system gave), released for
    MLflow's server; OSError (EADDRINUSE, EACCES) when it cannot be had. Bound as uvicorn binds (SO_REUSEADDR), so
    a port another server holds is refused and one a closed server left in TIME_WAIT is not."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", port))
        return probe.getsockname()[1]


def _stop(signum, frame):
    raise KeyboardInterrupt  # unwinds run(): its finally ends the server's group


def stop_group(process: subprocess.Popen, grace_s: float = 10.0) -> None:
    """End ``process`` and everything in its process group (it leads one: ``process_group=0``): SIGTERM, then
    SIGKILL for what is still there after ``grace_s``."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:  # the group is gone already
        process.wait()
        return
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:  # the workers it started may outlive it by a moment
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        group_ended(process.pid, within_s=5.0)  # a SIGKILL is delivered a moment later on a busy machine
    process.wait()


def group_ended(pgid: int, within_s: float) -> bool:
    """Wait up to ``within_s`` until no running process is left in group ``pgid`` (zombies awaiting their reaper
    count as ended: they hold no port and run nothing)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not running_members(pgid):
            return True
        time.sleep(0.05)
    return False


def running_members(pgid: int) -> list[int]:
    """The processes of group ``pgid`` that are not zombies (Linux: read from /proc; elsewhere, none known)."""
    members = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                members.append(int(entry))
    return members


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
