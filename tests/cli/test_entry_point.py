"""The installed script ends quietly on a closed pipe; calling ``main`` in-process changes no signal handler.

A pytest process that had called ``main`` once used to die silently (SIGPIPE's default action) when a test
server's thread later wrote to a client that had hung up: the whole suite stopped with no summary.
"""
from __future__ import annotations

import signal
import subprocess
import sys

from kbench.cli import main as kbench_main


def test_main_in_process_leaves_sigpipe_alone(capsys):
    before = signal.getsignal(signal.SIGPIPE)
    assert kbench_main(["models", "list"]) == 0
    assert "all-MiniLM-L6-v2" in capsys.readouterr().out
    assert signal.getsignal(signal.SIGPIPE) == before


def test_the_console_script_restores_sigpipe_default():
    code = ("import signal, kbench.cli as cli; cli.main = lambda argv=None: 0; cli.console_main(); "
            "print(signal.getsignal(signal.SIGPIPE) == signal.SIG_DFL)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "True"
