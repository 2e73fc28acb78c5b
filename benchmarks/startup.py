"""How long kbench takes to start: whole processes, wall and CPU time, beside `python -c pass` and `mlflow --version`
in the same run, and with ``--baseline REF`` the same commands on an older checkout's code, for a before/after table.

Each round runs every command once, in turn (and each command on both codes in turn), so load from other processes
falls on all of them alike; min and median over ``--rounds`` (at least 5). CPU time is the process's user + system
time (``getrusage`` of the children). A command that is refused must be refused the same way by both codes: the exit
code and the stderr line are compared, and a difference is printed.

Targets, median on a quiet machine: `kbench --help` and `kbench list` <= 0.3 s, every refused command <= 0.5 s,
`import kbench` <= 0.3 s.

Both codes are byte-compiled first (``compileall``, into the git-ignored ``__pycache__``), as any run after the first
finds them: with PYTHONDONTWRITEBYTECODE set nothing else writes them, and every process would compile kbench from
source.

``--baseline REF`` checks REF out with `git worktree add --detach` into a temporary folder (removed at the end) and
runs its code with this venv, that folder first on PYTHONPATH; the current code runs the same way from this
repository.

    .venv/bin/python benchmarks/startup.py [--rounds 7] [--baseline c656d87]
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from bench_io import write_json
from kbench.cli.tables import format_table

REPO_ROOT = Path(__file__).resolve().parents[1]  # the code timed as "now": this checkout, whatever kbench imports
BIN = Path(sys.executable).parent
KBENCH = [str(BIN / "kbench")]
# (label, argv, exit code, target in seconds or None); the refused ones print one line and exit 2
COMMANDS = [
    ("python -c pass", [sys.executable, "-c", "pass"], 0, None),
    ("mlflow --version", [str(BIN / "mlflow"), "--version"], 0, None),
    ('python -c "import kbench"', [sys.executable, "-c", "import kbench"], 0, 0.3),
    ("kbench --help", [*KBENCH, "--help"], 0, 0.3),
    ("kbench list", [*KBENCH, "list"], 0, 0.3),
    ("kbench run --help", [*KBENCH, "run", "--help"], 0, 0.5),
    ("kbench notebooks list", [*KBENCH, "notebooks", "list"], 0, 0.5),
    ("kbench run missing.yaml (refused)", [*KBENCH, "run", "missing.yaml"], 2, 0.5),
    ("kbench run x.yaml --sett (mistyped option)", [*KBENCH, "run", "x.yaml", "--sett", "a=1"], 2, 0.5),
    ("kbench compare (no runs: refused)", [*KBENCH, "compare"], 2, 0.5),
    ("kbench notebooks run nope (refused)", [*KBENCH, "notebooks", "run", "nope"], 2, 0.5),
]
REFERENCE = "python -c pass"


def run_once(argv: list[str], code_root: Path, cwd: Path, workspace: Path) -> tuple[float, float, int, str]:
    """(wall s, CPU s, exit code, last stderr line) of one whole process running ``code_root``'s kbench."""
    env = {**os.environ, "PYTHONPATH": str(code_root), "KBENCH_WORKSPACE": str(workspace)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          timeout=600)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = done.stderr.strip().splitlines()
    return wall, cpu, done.returncode, (lines[-1] if lines else "").replace(str(code_root), "<code>")


@contextmanager
def checkout(ref: str | None):
    """A detached worktree of ``ref`` in a temporary folder (None: nothing), removed afterwards."""
    if ref is None:
        yield None
        return
    folder = Path(tempfile.mkdtemp(prefix="kbench-startup-baseline-"))
    subprocess.run(["git", "-C", str(REPO_ROOT), "worktree", "add", "--detach", str(folder), ref], check=True,
                   capture_output=True, text=True)
    try:
        yield folder
    finally:
        subprocess.run(["git", "-C", str(REPO_ROOT), "worktree", "remove", "--force", str(folder)],
                       capture_output=True, text=True)


def load_line() -> str:
    done = subprocess.run(["uptime"], capture_output=True, text=True)
    return done.stdout.strip() or f"load average {os.getloadavg()}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="runs of each command (min and median; at least 5)")
    parser.add_argument("--baseline", metavar="REF", help="also time this git ref's code (e.g. main or a commit)")
    args = parser.parse_args()
    if args.rounds < 5:
        parser.error("--rounds: at least 5")
    print(f"before: {load_line()}", flush=True)
    with checkout(args.baseline) as baseline, tempfile.TemporaryDirectory(prefix="kbench-startup-") as folder:
        cwd, workspace = Path(folder), Path(folder) / "ws"
        codes = {"now": REPO_ROOT, **({"baseline": baseline} if baseline else {})}
        for root in codes.values():
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "kbench")], check=True)
        wall = {(c, code): [] for c, *_ in COMMANDS for code in codes}
        cpu = {(c, code): [] for c, *_ in COMMANDS for code in codes}
        answers: dict[tuple[str, str], tuple[int, str]] = {}
        for round_ in range(args.rounds):
            for label, argv, expected, _ in COMMANDS:
                for code, root in codes.items():
                    seconds, cpu_seconds, status, line = run_once(argv, root, cwd, workspace)
                    if code == "now" and status != expected:
                        raise SystemExit(f"{label}: exit {status}, expected {expected}: {line}")
                    wall[(label, code)].append(seconds)
                    cpu[(label, code)].append(cpu_seconds)
                    answers[(label, code)] = (status, line)
            print(f"round {round_ + 1} of {args.rounds} done", file=sys.stderr, flush=True)
    after = load_line()
    reference = statistics.median(wall[(REFERENCE, "now")])
    headers = ["command", "wall min", "wall median", "CPU median", "x python -c pass", "target", "met"]
    if baseline:
        headers[1:1] = ["before: wall median", "before: CPU median"]
        headers.append("before / now")
    rows, summary = [], {}
    for label, _, expected, target in COMMANDS:
        now = statistics.median(wall[(label, "now")])
        row = [label, min(wall[(label, "now")]), now, statistics.median(cpu[(label, "now")]), now / reference,
               f"<= {target}" if target else "", ("yes" if now <= target else "NO") if target else ""]
        summary[label] = {"wall_median": now, "wall_min": min(wall[(label, "now")]),
                          "cpu_median": statistics.median(cpu[(label, "now")]), "target": target}
        if baseline:
            before = statistics.median(wall[(label, "baseline")])
            row[1:1] = [before, statistics.median(cpu[(label, "baseline")])]
            row.append(before / now)
            summary[label].update(baseline_wall_median=before,
                                  baseline_cpu_median=statistics.median(cpu[(label, "baseline")]))
        rows.append(row)
    print(format_table(headers, rows, decimals=3))
    print(f"\nseconds, {args.rounds} whole-process runs each, in turn; code now: {REPO_ROOT}"
          + (f"; before: {args.baseline}" if baseline else ""))
    for label, _, expected, _ in COMMANDS:
        if baseline and expected == 2 and answers[(label, "now")] != answers[(label, "baseline")]:
            print(f"refused differently: {label}: now {answers[(label, 'now')]}, before "
                  f"{answers[(label, 'baseline')]}")
    print(f"after: {after}")
    write_json("startup", {"rounds": args.rounds, "baseline": args.baseline, "commands": summary,
                           "wall": {f"{label} [{code}]": v for (label, code), v in wall.items()},
                           "cpu": {f"{label} [{code}]": v for (label, code), v in cpu.items()},
                           "uptime_after": after})
    return 0


if __name__ == "__main__":
    sys.exit(main())
