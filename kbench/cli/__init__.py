"""The ``kbench`` command. Each command group lives in its own module and adds its subparsers here."""
from __future__ import annotations

import argparse
import signal
import sys

from kbench.cli import cache_cmd, chunk_cmd, datasets_cmd, models_cmd, run_cmd
from kbench.cli import compare_cmd, gate_cmd, sweep_cmd
from kbench.cli import notebooks_cmd
from kbench.cli import runs_cmd, ui_cmd
from kbench.cli import serve_cmd
from kbench.cli import judge_cmd
from kbench.cli import label_cmd
from kbench.cli import list_cmd
from kbench.cli import store_cmd
from kbench.cli.console import quiet_libraries, show_notes_plainly
from kbench.cli.errors import report_errors

# Each module has add_parser(subparsers); a parser's ``func(args) -> int`` does the work.
COMMAND_MODULES = [run_cmd, datasets_cmd, models_cmd, chunk_cmd, cache_cmd, sweep_cmd, compare_cmd, gate_cmd,
                   notebooks_cmd, runs_cmd, serve_cmd, judge_cmd, label_cmd, store_cmd, ui_cmd, list_cmd]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kbench", description="Measure every stage of a RAG knowledge base.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command in this process (tests and notebooks call it; it changes no process-wide state)."""
    args = build_parser().parse_args(argv)
    with report_errors():
        return int(args.func(args) or 0)
    return 1


def console_main() -> int:
    """The installed ``kbench`` script: ``kbench ... | head`` ends quietly on a closed pipe.

    SIGPIPE's default action kills the process, so it is set only here, never in ``main``: a process that
    calls ``main`` in-process (pytest, a notebook kernel) and also serves sockets from threads would be
    killed silently the first time a peer hangs up. The libraries' bars and INFO lines are quieted, and kbench's
    notes shown as ``kbench: note: ...``, here too (cli/console.py).
    """
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    quiet_libraries()
    show_notes_plainly()
    return main()


if __name__ == "__main__":
    sys.exit(console_main())
