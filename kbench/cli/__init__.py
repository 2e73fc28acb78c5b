"""The ``kbench`` command.

It knows every command by name, one-line help and the module that implements it (``COMMANDS``), and imports that
module only when the command runs: ``kbench --help`` imports no command module, ``kbench run ...`` only
``cli/run_cmd.py``. A command module's ``add_parser(sub)`` adds its commands (the module's commands sit together in
``COMMANDS``, in the order its ``add_parser`` adds them) and gives each parser ``func(args) -> int``, which does the
work. A command module reaches what lies below through a package or the public API (``from kbench import compare``,
then ``compare.compare_runs``), which load a module when a name of it is first used (kbench/lazy.py), so a
refused option or a missing file costs no library.
"""
from __future__ import annotations

import argparse
import importlib
import signal
import sys
from collections.abc import Iterable
from dataclasses import dataclass

from kbench.cli.console import quiet_libraries, show_notes_plainly
from kbench.cli.errors import report_errors
from kbench.lazy import lazy_exports

# a module of the package is imported when first named (``cli.reference``), as in every kbench package
__getattr__, __dir__, _ = lazy_exports(__name__, {})


@dataclass(frozen=True)
class Command:
    module: str  # kbench/cli/<module>.py, whose add_parser(sub) adds this command
    help: str  # its line in ``kbench --help``


COMMANDS: dict[str, Command] = {
    "run": Command("run_cmd", "run one experiment from a YAML config"),
    "datasets": Command("datasets_cmd", "datasets: list, build, inspect, publish, import-queries, match"),
    "models": Command("models_cmd", "models: list, prepare, tune, train-reranker"),
    "chunk": Command("chunk_cmd", "chunk a corpus and print chunk statistics and samples"),
    "cache": Command("cache_cmd", "the workspace's content-addressed caches: stats, clear"),
    "sweep": Command("sweep_cmd", "run every config of a sweep (grid + variants) as MLflow child runs; resumable"),
    "compare": Command("compare_cmd", "compare runs or a sweep: metric differences to a baseline with paired "
                                      "significance tests, bootstrap CIs and a markdown/HTML report"),
    "export": Command("compare_cmd", "write a logged run's ranking and qrels as TREC files (run.trec, qrels.txt) or "
                                     "in AutoRAG's layout (--format autorag)"),
    "import-trec": Command("compare_cmd", "score a TREC run file from another tool on a config's dataset and log it "
                                          "as a kbench run (then kbench compare can test it against kbench runs)"),
    "gate": Command("gate_cmd", "regression gate for CI: exit 1 when CANDIDATE is significantly worse than BASELINE "
                                "by more than --margin on a gated metric, 0 otherwise, 2 on bad input"),
    "notebooks": Command("notebooks_cmd", "run the study notebooks under notebooks/ with papermill"),
    "runs": Command("runs_cmd", "list recent runs with their headline metrics; `runs show ID [--misses]` for one"),
    "serve": Command("serve_cmd", "a local OpenAI-compatible endpoint: /v1/models, /v1/embeddings, "
                                  "/v1/chat/completions (no key, no network)"),
    "judge": Command("judge_cmd", "grade the unlabeled pooled top-k of runs with an LLM (0-3), write qrels; "
                                  "--calibrate measures the judge on labeled pairs"),
    "label": Command("label_cmd", "label (question, passage) pairs on a local page, in the order that decides the "
                                  "top configs soonest; PPI++ intervals from human + judge grades"),
    "store": Command("store_cmd", "live production stores: kbench store snapshot"),
    "ui": Command("ui_cmd", "start MLflow's UI on 127.0.0.1 for the workspace's runs (Ctrl-C stops it)"),
    "list": Command("list_cmd", "what each registry holds: chunkers, legs, fusions, ... with every knob"),
}


def add_command(sub, name: str, **kwargs) -> argparse.ArgumentParser:
    """The parser of command ``name`` with its line of ``COMMANDS`` (what a command module's add_parser calls)."""
    return sub.add_parser(name, help=COMMANDS[name].help, **kwargs)


def seed_number(text: str) -> int:
    """The type of a ``--seed`` option: a whole number from 0 (numpy's generators take no negative seed, and found
    out only after the work it seeds)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is no seed; give a whole number from 0, e.g. 0") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is no seed; give a whole number from 0, e.g. 0")
    return value


def build_parser(commands: Iterable[str] | None = None) -> argparse.ArgumentParser:
    """The parser with the full arguments of ``commands`` (default: every command, which imports every command
    module); every other command is there by name and help only, enough for ``kbench --help`` and its errors."""
    modules = {COMMANDS[name].module for name in (COMMANDS if commands is None else commands) if name in COMMANDS}
    parser = argparse.ArgumentParser(prog="kbench", description="Measure every stage of a RAG knowledge base.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    added: set[str] = set()
    for name, command in COMMANDS.items():
        if command.module not in modules:
            add_command(sub, name)
        elif command.module not in added:
            importlib.import_module(f"kbench.cli.{command.module}").add_parser(sub)
            added.add(command.module)
    return parser


def command_named(argv: list[str]) -> str | None:
    """The command ``argv`` runs: its first word that is not an option (``kbench`` itself takes only -h)."""
    return next((word for word in argv if not word.startswith("-")), None)


def main(argv: list[str] | None = None) -> int:
    """Run one command in this process (tests and notebooks call it; it changes no process-wide state)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = command_named(argv)
    args = build_parser([command] if command else []).parse_args(argv)
    with report_errors(command):
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
