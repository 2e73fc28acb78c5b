"""How long `kbench ui` takes to answer: from the command to the first HTTP 200 of its page, against MLflow's own
`mlflow ui` with its defaults (4 server workers), taken in turn ``--rounds`` times on one store.

A store with runs is made first (one quickstart run, 20 questions, into a temporary workspace). Both commands serve
it on 127.0.0.1; each round starts one, polls its page every 0.1 s, then stops it (its process group) before the
next starts. The best of each is compared, with the median beside it.

Target: `kbench ui` answers within 10 s on 2 cores.

    .venv/bin/python benchmarks/ui_startup.py [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from bench_io import write_json
from kbench import format_table, load_experiment, run_experiment
from kbench.cli.ui_cmd import ui_command, ui_environment
from kbench.paths import REPO_ROOT

TARGET_S = 10.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def time_to_answer(command: list[str], port: int, env: dict[str, str], limit_s: float = 300) -> float:
    started = time.perf_counter()
    server = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        while time.perf_counter() - started < limit_s:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1) as answer:
                    if answer.status == 200:
                        return time.perf_counter() - started
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"{command[0]} did not answer within {limit_s:.0f} s")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kbench-ui-bench-") as folder:
        workspace = Path(folder) / "ws"
        run_experiment(load_experiment(REPO_ROOT / "configs" / "quickstart.yaml",
                                       [f"workspace={workspace}", "dataset.max_queries=20"]), progress=False)
        uri = f"sqlite:///{workspace / 'mlflow.db'}"
        kbench = [str(Path(sys.executable).parent / "kbench"), "ui", "--tracking-uri", uri]
        mlflow = [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri, "--host", "127.0.0.1"]
        seconds: dict[str, list[float]] = {"kbench ui (1 worker)": [], "mlflow ui (its default: 4 workers)": []}
        for _ in range(args.rounds):
            port = free_port()
            seconds["kbench ui (1 worker)"].append(time_to_answer([*kbench, "--port", str(port)], port,
                                                                  dict(os.environ)))
            port = free_port()
            seconds["mlflow ui (its default: 4 workers)"].append(time_to_answer([*mlflow, "--port", str(port)], port,
                                                                                dict(os.environ)))
    best = {name: min(values) for name, values in seconds.items()}
    mine, theirs = best.values()
    rows = [[name, min(values), statistics.median(values)] for name, values in seconds.items()]
    print(format_table(["command", "best s", "median s"], rows))
    print(f"\nkbench ui answers in {mine:.1f} s ({mine / theirs:.2f}x mlflow ui's defaults; target <= {TARGET_S:.0f} s: "
          f"{'met' if mine <= TARGET_S else 'NOT met'}); load average {os.getloadavg()[0]:.2f}")
    write_json("ui_startup", {"seconds": seconds, "best": best, "ratio": mine / theirs, "target_s": TARGET_S,
                              "command": ui_command(uri), "env_added": sorted(set(ui_environment()) - set(os.environ))})
    return 0


if __name__ == "__main__":
    sys.exit(main())
