"""The ``kbench`` command. Each command group lives in its own module and adds its subparsers here."""
from __future__ import annotations

import argparse
import sys

from kbench.cli import cache_cmd, chunk_cmd, datasets_cmd, models_cmd, run_cmd
from kbench.cli import compare_cmd, gate_cmd, sweep_cmd
from kbench.cli import notebooks_cmd
from kbench.cli import runs_cmd, ui_cmd
from kbench.cli import serve_cmd
from kbench.cli import judge_cmd
from kbench.cli import store_cmd
from kbench.cli.errors import report_errors

# Each module has add_parser(subparsers); a parser's ``func(args) -> int`` does the work.
COMMAND_MODULES = [run_cmd, datasets_cmd, models_cmd, chunk_cmd, cache_cmd, sweep_cmd, compare_cmd, gate_cmd,
                   notebooks_cmd, runs_cmd, serve_cmd, judge_cmd, store_cmd, ui_cmd]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kbench", description="Measure every stage of a RAG knowledge base.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    import signal


    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `kbench ... | head` ends quietly

    args = build_parser().parse_args(argv)
    with report_errors():
        return int(args.func(args) or 0)
    return 1


if __name__ == "__main__":
    sys.exit(main())
