"""MLflow tracing cost: a quickstart run with its per-question traces (the default) against the same run without.

Both are real ``run_experiment`` calls of configs/quickstart.yaml (demo set, 98 questions, MiniLM, vector search)
in one fresh workspace whose caches one untimed run warmed first, so each timed run loads the model, searches,
evaluates, writes its run folder and logs to MLflow; the traced one also writes candidates.parquet and exports
one trace per question (spans, expectations, links: kbench.tracking.mlflow_traces). The two are run in turn,
``--rounds`` times; the best of each is compared. Target: traces add at most 10% to the run's wall time. The
trace export's own seconds (timed inside the run, ``ExportReport.traces.seconds``) over the run without traces is
printed too: the same figure, less exposed to load from other processes.

    .venv/bin/python benchmarks/mlflow_tracing.py [--rounds 5] [--max-queries N]
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from bench_io import write_json
from kbench import format_table, load_experiment, run_experiment
from kbench.paths import REPO_ROOT

TARGET = 0.10


def experiment(workspace: Path, traces: bool, max_queries: int | None):
    overrides = [f"workspace={workspace}", f"tracking.traces.enabled={str(traces).lower()}"]
    if max_queries:
        overrides.append(f"dataset.max_queries={max_queries}")
    return load_experiment(str(REPO_ROOT / "configs" / "quickstart.yaml"), overrides)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="runs of each, in turn (default 5)")
    parser.add_argument("--max-queries", type=int, default=None, help="a seeded sample of the questions (a check "
                        "that the script runs; the figure is for the full 98)")
    parser.add_argument("--workspace", type=Path, default=None, help="default: a fresh temporary folder")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    outer_workspace = os.environ.pop("KBENCH_WORKSPACE", None)  # it would override the config's workspace
    workspace = args.workspace or Path(tempfile.mkdtemp(prefix="kbench-tracing-"))
    run_experiment(experiment(workspace, True, args.max_queries), progress=False)  # warm caches, create the store
    best = {"traces on": float("inf"), "traces off": float("inf")}
    export_s, traces = float("inf"), 0
    for _ in range(args.rounds):
        for name in best:
            t = time.perf_counter()
            result = run_experiment(experiment(workspace, name == "traces on", args.max_queries), progress=False)
            best[name] = min(best[name], time.perf_counter() - t)
            if name == "traces on":
                report = result.export_report.traces
                export_s, traces = min(export_s, report.seconds), report.logged
    overhead = best["traces on"] / best["traces off"] - 1
    if outer_workspace is not None:
        os.environ["KBENCH_WORKSPACE"] = outer_workspace  # the JSON goes where the caller's workspace is
    questions = args.max_queries or 98
    print(f"\n## MLflow tracing: quickstart ({questions} questions), best of {args.rounds} runs each\n")
    print(format_table(["", "wall seconds", "vs off"], [
        ["traces off", f"{best['traces off']:.2f}", "1.00x"],
        ["traces on", f"{best['traces on']:.2f}", f"{best['traces on'] / best['traces off']:.3f}x"],
    ]))
    share = export_s / best["traces off"]
    print(f"\ntraces: {traces} questions, trace export {export_s:.2f} s (best), {share:.1%} of the run without "
          f"traces; wall time overhead {overhead:+.1%} (target <= {TARGET:.0%}): "
          f"{'met' if overhead <= TARGET else 'NOT met'}")
    write_json("mlflow_tracing", {"questions": questions, "rounds": args.rounds, "traces_off_s": best["traces off"],
                                  "traces_on_s": best["traces on"], "trace_export_s": export_s,
                                  "export_share": share, "overhead": overhead, "target_overhead": TARGET})


if __name__ == "__main__":
    main()
