"""kbench notebooks run NAME [-p key value ...] | --all [--profile ci]: papermill runs, one MLflow run each."""
from __future__ import annotations

from kbench.cli import add_command
from kbench.studies import (NotebookError, declared_parameters, notebook_names, notebook_path, parse_value, run_all,
                            run_notebook)


def add_parser(sub) -> None:
    p = add_command(sub, "notebooks")
    nsub = p.add_subparsers(dest="notebooks_command", required=True, metavar="SUBCOMMAND")
    r = nsub.add_parser("run", help="execute notebook(s) into <workspace>/notebooks/<timestamp>-NAME.ipynb and log "
                                    "each as an MLflow run (experiment 'notebooks') with the executed copy and plots")
    r.add_argument("names", nargs="*", metavar="NAME", help="e.g. 01_chunking (see `kbench notebooks list`)")
    r.add_argument("--all", action="store_true", help="run every notebook in order")
    r.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("KEY", "VALUE"),
                   help="override a parameters-cell value; VALUE is YAML (20, true, [128, 256], demo)")
    r.add_argument("--profile", help="a parameter set from kbench/notebooks/profiles.yaml, e.g. ci")
    r.add_argument("--output-dir", help="default: <workspace>/notebooks")
    r.set_defaults(func=run_notebooks)
    ls = nsub.add_parser("list", help="the notebooks and their parameters")
    ls.set_defaults(func=list_notebooks)


def run_notebooks(args) -> int:

    params = {key: parse_value(value) for key, value in args.parameter}
    if args.all == bool(args.names):
        raise NotebookError("give notebook NAME(s) or --all, not both or neither")
    if args.all:
        results = run_all(args.profile, params, output_dir=args.output_dir)
    else:
        results = [run_notebook(n, params, profile=args.profile, output_dir=args.output_dir) for n in args.names]
    print(f"\n{'notebook':<16} {'status':<9} {'seconds':>8}  output")
    for r in results:
        print(f"{r.name:<16} {r.status:<9} {r.seconds:>8.1f}  {r.output}")
    return 0 if all(r.status == "FINISHED" for r in results) else 1


def list_notebooks(args) -> int:

    for name in notebook_names():
        params = declared_parameters(notebook_path(name))
        print(f"{name}: " + ", ".join(f"{k}={v}" for k, v in params.items()))
    return 0
