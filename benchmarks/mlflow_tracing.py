"""MLflow tracing cost: a quickstart run with its per-question traces (the default) against the same run without.

configs/quickstart.yaml (demo set, 98 questions, MiniLM, vector search) in one fresh workspace whose caches one
untimed run warmed first. Two measurements, traced and untraced runs taken in turn ``--rounds`` times, the best of
each compared:

- in one process: ``run_experiment`` (load the model, search, evaluate, write the run folder, log to MLflow; the
  traced run also writes candidates.parquet and exports one trace per question: kbench.tracking.mlflow_traces).
  The interpreter and its imports are paid once, so this is the strictest ratio. The trace export's own seconds
  (timed inside the run, ``ExportReport.traces.seconds``) over the untraced run is printed too: the same figure,
  less exposed to load from other processes.
- as a person runs it: ``kbench run configs/quickstart.yaml`` in a new process each time (``--cli-rounds``, 0 to
  skip), what the quickstart costs end to end.

Target: traces add at most 10% to a quickstart run's wall time.

    .venv/bin/python benchmarks/mlflow_tracing.py [--rounds 5] [--cli-rounds 3] [--max-queries N]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_io import write_json
from kbench import format_table, load_experiment, run_experiment
from kbench.paths import REPO_ROOT

TARGET = 0.10
CONFIG = REPO_ROOT / "configs" / "quickstart.yaml"


def overrides(workspace: Path, traces: bool, max_queries: int | None) -> list[str]:
    found = [f"workspace={workspace}", f"tracking.traces.enabled={str(traces).lower()}"]
    return found + ([f"dataset.max_queries={max_queries}"] if max_queries else [])


def in_process(workspace: Path, rounds: int, max_queries: int | None) -> tuple[dict[str, float], float, int]:
    best = {"traces off": float("inf"), "traces on": float("inf")}
    export_s, traces = float("inf"), 0
    for _ in range(rounds):
        for name in best:
            experiment = load_experiment(str(CONFIG), overrides(workspace, name == "traces on", max_queries))
            t = time.perf_counter()
            result = run_experiment(experiment, progress=False)
            best[name] = min(best[name], time.perf_counter() - t)
            if name == "traces on":
                export_s, traces = min(export_s, result.export_report.traces.seconds), result.export_report.traces.logged
    return best, export_s, traces


def as_a_command(workspace: Path, rounds: int, max_queries: int | None) -> dict[str, float]:
    best = {"traces off": float("inf"), "traces on": float("inf")}
    kbench = Path(sys.executable).with_name("kbench")
    for _ in range(rounds):
        for name in best:
            sets = [arg for o in overrides(workspace, name == "traces on", max_queries) for arg in ("--set", o)]
            t = time.perf_counter()
            subprocess.run([str(kbench), "run", str(CONFIG), *sets, "--quiet"], check=True, capture_output=True,
                           env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
            best[name] = min(best[name], time.perf_counter() - t)
    return best


def rows(best: dict[str, float]) -> list[list[str]]:
    off = best["traces off"]
    return [[name, f"{seconds:.2f}", f"{seconds / off:.3f}x"] for name, seconds in best.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="in-process runs of each, in turn (default 5)")
    parser.add_argument("--cli-rounds", type=int, default=3, help="`kbench run` processes of each (default 3; 0 skips)")
    parser.add_argument("--max-queries", type=int, default=None, help="a seeded sample of the questions (a check "
                        "that the script runs; the figure is for the full 98)")
    parser.add_argument("--workspace", type=Path, default=None, help="default: a fresh temporary folder")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    outer_workspace = os.environ.pop("KBENCH_WORKSPACE", None)  # it would override the config's workspace
    workspace = args.workspace or Path(tempfile.mkdtemp(prefix="kbench-tracing-"))
    warm = load_experiment(str(CONFIG), overrides(workspace, True, args.max_queries))
    run_experiment(warm, progress=False)  # warm caches, create the store
    best, export_s, traces = in_process(workspace, args.rounds, args.max_queries)
    command = as_a_command(workspace, args.cli_rounds, args.max_queries) if args.cli_rounds else None
    if outer_workspace is not None:
        os.environ["KBENCH_WORKSPACE"] = outer_workspace  # the JSON goes where the caller's workspace is
    questions = args.max_queries or 98
    overhead = best["traces on"] / best["traces off"] - 1
    share = export_s / best["traces off"]
    print(f"\n## MLflow tracing: quickstart ({questions} questions), in one process, best of {args.rounds} each\n")
    print(format_table(["", "wall seconds", "vs off"], rows(best)))
    print(f"\ntraces: {traces} questions, trace export {export_s:.2f} s (best), {share:.1%} of the run without "
          f"traces; wall time overhead {overhead:+.1%} (target <= {TARGET:.0%}): "
          f"{'met' if overhead <= TARGET else 'NOT met'}")
    payload = {"questions": questions, "rounds": args.rounds, "traces_off_s": best["traces off"],
               "traces_on_s": best["traces on"], "trace_export_s": export_s, "export_share": share,
               "overhead": overhead, "target_overhead": TARGET}
    if command is not None:
        command_overhead = command["traces on"] / command["traces off"] - 1
        print(f"\n## as a person runs it: `kbench run configs/quickstart.yaml`, best of {args.cli_rounds} each\n")
        print(format_table(["", "wall seconds", "vs off"], rows(command)))
        print(f"\nwall time overhead {command_overhead:+.1%} (target <= {TARGET:.0%}): "
              f"{'met' if command_overhead <= TARGET else 'NOT met'}")
        payload.update(command_off_s=command["traces off"], command_on_s=command["traces on"],
                       command_overhead=command_overhead)
    write_json("mlflow_tracing", payload)


if __name__ == "__main__":
    main()
