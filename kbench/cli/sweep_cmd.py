"""kbench sweep CONFIG [--executor local|dask] [--scheduler tcp://HOST:PORT] [--workers N]"""
from __future__ import annotations

import os
import sys

from kbench.cli.tables import format_table
from kbench.sweep.executors import make_executor
from kbench.sweep.expand import load_sweep
from kbench.sweep.run import SweepError, run_sweep


def add_parser(sub) -> None:
    p = sub.add_parser("sweep", help="run every config of a sweep (grid + variants) as MLflow child runs; resumable")
    p.add_argument("config", help="a YAML config with a 'sweep:' grid and/or 'variants:', e.g. configs/sweeps/demo.yaml")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a baseline value by dotted path, e.g. --set dataset.max_queries=30")
    p.add_argument("--executor", choices=["local", "dask"], default="local",
                   help="local: one config after another in this process; dask: on a Dask cluster")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help="a running Dask scheduler; without it --executor dask starts a LocalCluster on 127.0.0.1")
    p.add_argument("--workers", type=int, default=2, help="LocalCluster workers (one thread each); default 2")
    p.add_argument("--no-reuse", action="store_true",
                   help="run configs again even when an equal config (same run key) finished outside this sweep")
    p.add_argument("--no-report", action="store_true", help="skip the comparison report at the end")
    p.add_argument("--dry-run", action="store_true", help="list the configs, their run keys and knobs; run nothing")
    p.set_defaults(func=run)


def run(args) -> int:
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # keep the sweep log readable

    plan = load_sweep(args.config, args.overrides)
    if args.dry_run:
        rows = [[c.label, c.run_key, ", ".join(f"{k}={v}" for k, v in c.knobs.items()) or "(baseline)"]
                for c in plan.configs]
        print(format_table(["config", "run key", "knobs that differ from the baseline"], rows))
        print(f"\n{len(plan.configs)} configs, sweep key {plan.sweep_key}")
        return 0
    if args.workers < 1:
        print("kbench: error: --workers must be at least 1", file=sys.stderr)
        return 2

    try:
        executor = make_executor(args.executor, args.scheduler, args.workers)
        outcome = run_sweep(plan, executor, reuse=not args.no_reuse, report=not args.no_report,
                            say=lambda line: print(line, flush=True))
    except (SweepError, ValueError) as e:
        print(f"kbench: error: {e}", file=sys.stderr)
        return 2
    print()
    print(f"sweep {plan.name}: {outcome.count('ran')} ran, {outcome.count('done')} finished before, "
          f"{outcome.count('reused')} reused, {outcome.count('failed')} failed")
    for label, error in outcome.errors.items():
        print(f"  FAILED {label}: {error}")
    if outcome.report_dir:
        print(f"report: {outcome.report_dir / 'report.md'} (also artifact report/ of the parent run)")
    print(f"MLflow parent run {outcome.parent_run_id} in {outcome.tracking_uri}")
    print(f"  compare: kbench compare --sweep {outcome.parent_run_id} --tracking-uri {outcome.tracking_uri}")
    return 1 if outcome.errors else 0
