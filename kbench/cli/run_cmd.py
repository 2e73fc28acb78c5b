"""kbench run CONFIG [--set section.key=value ...]"""
from __future__ import annotations

import sys

import kbench
from kbench.cli import add_command
from kbench.cli.console import quiet_libraries
from kbench.cli.tables import print_metrics


def add_parser(sub) -> None:
    p = add_command(sub, "run")
    p.add_argument("config", help="a YAML config, e.g. configs/quickstart.yaml")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value by dotted path, e.g. --set chunking.chunk_size=400")
    p.add_argument("--no-log", action="store_true", help="do not log to MLflow (results still land in the workspace)")
    p.add_argument("--allow-partial", action="store_true",
                   help="let LLM stages go on below llm.policy.min_usable (said loudly, tagged kbench.llm.partial)")
    p.add_argument("--quiet", action="store_true", help="no progress bars (only the results are printed)")
    p.set_defaults(func=run)


def run(args) -> int:
    quiet_libraries(progress_bars=not args.quiet)
    experiment = kbench.load_experiment(args.config, args.overrides + (["llm.policy.allow_partial=true"]
                                                                if args.allow_partial else []))
    result = kbench.run_experiment(experiment, progress=not args.quiet, log=not args.no_log)
    print_metrics(result)
    if result.tracking_error:  # results and folder printed first; then why they are not (all) in MLflow
        # a run with an id is logged and only its traces failed; the error says how to write them
        where = "the results are in" if result.run_id else "Not logged to MLflow; the results are in"
        print(f"kbench: error: {result.tracking_error}. {where} {result.run_dir}", file=sys.stderr)
        return 2
    return 0
