"""The docs pages' fork server (tests/docs/forkserver.py): a `kbench` line run through it is the real process.

Two servers, each started once for this module: one runs kbench's own entry point, compared with the installed
`kbench` script line for line (exit code, stdout, stderr); one runs ``probe`` below, which does what a command may
do (read stdin, look at its environment and cwd, crash, hang) so each property is checked on its own.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from kbench.paths import REPO_ROOT
from tests.conftest import make_config
from tests.docs.forkserver import ForkServer
from tests.docs.test_commands import reader_environment

REAL_KBENCH = REPO_ROOT / ".venv" / "bin" / "kbench"


def probe() -> int:
    """A child's stand-in for kbench: ``probe WHAT [ARG]``."""
    what, *rest = sys.argv[1:]
    if what == "stdin":
        sys.stdout.write(sys.stdin.read().upper())
    elif what == "streams":
        print("to stdout")
        print("to stderr", file=sys.stderr)
        print(f"isatty {sys.stdout.isatty()} {sys.stderr.isatty()}")
    elif what == "env":
        print(os.environ.get(rest[0], "<unset>"), os.getenv(rest[0], "<unset>"))
    elif what == "where":
        print(os.getcwd(), oct(os.umask(0)), sys.argv[0].rsplit("/", 1)[-1])
    elif what == "random":
        import numpy as np
        import random
        print(random.random(), np.random.random())
    elif what == "crash":
        raise RuntimeError("the probe crashed")
    elif what == "exit":
        return int(rest[0])
    elif what == "hang":
        print("hanging", flush=True)
        time.sleep(600)
    elif what == "interrupt":
        try:  # the print too: a SIGINT that lands as it returns is raised there, and must be caught as well
            print("waiting", flush=True)
            time.sleep(600)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            return 7
    elif what == "tqdm":  # what `kbench run --quiet` does, after the server imported tqdm
        os.environ["TQDM_DISABLE"] = "1"
        from tqdm import tqdm
        print(sum(tqdm(range(3), file=sys.stderr, mininterval=0)))
    elif what == "signals":
        print(signal.getsignal(signal.SIGINT) == signal.SIG_IGN, signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)
    return 0


@pytest.fixture(scope="module")
def kbench_server():
    server = ForkServer(reader_environment(), REAL_KBENCH)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def probe_forks():
    server = ForkServer(reader_environment(), REAL_KBENCH, entry="tests.docs.test_forkserver:probe")
    yield server
    server.stop()


def shell(server: ForkServer | None, script: str, cwd: Path | None = None, timeout: float = 120, **extra_env):
    """``script`` in bash as a docs page runs it, `kbench` the server's client (or the real one for None)."""
    env = {**reader_environment(), **extra_env}
    if server is not None:
        env["PATH"] = f"{server.bin}{os.pathsep}{env['PATH']}"
    return subprocess.run(["bash", "-c", script], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("line", ["kbench --help", "kbench nosuch", "kbench run missing.yaml",
                                  "kbench run --help | head -3; echo \"status ${PIPESTATUS[0]}\"",
                                  "kbench list chunkers", "kbench runs --limit 1 || echo \"failed with $?\""])
def test_a_line_through_the_server_is_the_real_process(line, kbench_server, tmp_path):
    real = shell(None, line, cwd=tmp_path, KBENCH_WORKSPACE=str(tmp_path / "ws"))
    forked = shell(kbench_server, line, cwd=tmp_path, KBENCH_WORKSPACE=str(tmp_path / "ws"))
    assert (forked.returncode, forked.stdout, forked.stderr) == (real.returncode, real.stdout, real.stderr)
    assert real.stdout or real.stderr  # each line says something, so equal outputs compare something


def test_the_page_finds_the_client(kbench_server):
    assert shell(kbench_server, "command -v kbench").stdout.strip() == str(kbench_server.bin / "kbench")


def test_exit_codes_and_stdin_pass_through(probe_forks):
    done = shell(probe_forks, "kbench exit 3; echo \"got $?\"; kbench exit 0 && echo ok; printf 'abc' | kbench stdin")
    assert done.stdout == "got 3\nok\nABC", done.stderr
    assert shell(probe_forks, "kbench exit 300").returncode == 300 & 0xFF


def test_stdout_and_stderr_are_the_lines_own(probe_forks, tmp_path):
    done = shell(probe_forks, f"kbench streams 2>{tmp_path / 'err'} | cat")
    assert done.stdout == "to stdout\nisatty False False\n"
    assert (tmp_path / "err").read_text() == "to stderr\n"
    merged = shell(probe_forks, "kbench streams 2>&1 >/dev/null")
    assert merged.stdout == "to stderr\n"


def test_environment_cwd_and_umask_are_the_lines_own(probe_forks, tmp_path):
    done = shell(probe_forks, "export KB_PROBE=one; kbench env KB_PROBE; KB_PROBE=two kbench env KB_PROBE; "
                              "unset KB_PROBE; kbench env KB_PROBE; umask 027; kbench where", cwd=tmp_path)
    assert done.stdout.splitlines() == ["one one", "two two", "<unset> <unset>", f"{tmp_path} 0o27 kbench"]
    path = shell(probe_forks, "kbench env PATH").stdout.split()[0]
    assert str(probe_forks.bin) not in path  # a kbench the child starts is the real one


def test_each_child_draws_its_own_random_numbers(probe_forks):
    draws = shell(probe_forks, "kbench random; kbench random").stdout.splitlines()
    assert len(draws) == 2 and draws[0] != draws[1]
    assert len(set(draws[0].split()) | set(draws[1].split())) == 4


def test_a_crash_in_the_child_reads_as_in_a_real_process(probe_forks):
    done = shell(probe_forks, "kbench crash")
    assert done.returncode == 1
    assert done.stderr.startswith("Traceback (most recent call last)")
    assert done.stderr.rstrip().endswith("RuntimeError: the probe crashed")
    assert "BecomeChild" not in done.stderr
    assert shell(probe_forks, "kbench exit 0").returncode == 0  # the server lives on


def test_signals_reach_the_child_and_a_background_job_ignores_sigint(probe_forks):
    background = shell(probe_forks, "kbench signals & wait $!").stdout.split()
    assert background == ["True", "True"]  # bash ignores SIGINT in a background job; so does its child
    assert shell(probe_forks, "kbench signals").stdout.split() == ["False", "True"]
    stopped = shell(probe_forks, "kbench hang & pid=$!; sleep 2; kill $pid; wait $pid; echo \"status $?\"", timeout=60)
    assert stopped.stdout.splitlines() == ["hanging", f"status {128 + signal.SIGTERM}"]


def test_ctrl_c_interrupts_the_child_as_a_terminal_would(probe_forks):
    env = {**reader_environment(), "PATH": f"{probe_forks.bin}{os.pathsep}{os.environ['PATH']}"}
    client = subprocess.Popen([str(probe_forks.bin / "kbench"), "interrupt"], env=env, stdout=subprocess.PIPE, text=True)
    assert client.stdout.readline() == "waiting\n"
    client.send_signal(signal.SIGINT)
    assert client.wait(timeout=30) == 7
    assert client.stdout.read() == "interrupted\n"


def test_a_killed_client_takes_its_child_with_it(probe_forks):
    """The docs test kills a page that ran out of time with SIGKILL: the child, the server's, must not live on."""
    env = {**reader_environment(), "PATH": f"{probe_forks.bin}{os.pathsep}{os.environ['PATH']}"}
    client = subprocess.Popen([str(probe_forks.bin / "kbench"), "hang"], env=env, stdout=subprocess.PIPE, text=True)
    assert client.stdout.readline() == "hanging\n"
    children = child_pids(probe_forks.process.pid)
    assert len(children) == 1
    client.kill()
    client.wait()
    deadline = time.monotonic() + 30
    while os.path.exists(f"/proc/{children[0]}") and zombie(children[0]) is False and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{children[0]}") or zombie(children[0])
    assert shell(probe_forks, "kbench exit 0").returncode == 0


def child_pids(pid: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def zombie(pid: int) -> bool | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except (FileNotFoundError, IndexError):
        return None


def test_a_quiet_run_prints_what_the_real_process_prints(kbench_server, tmp_path):
    """`--quiet` sets TQDM_DISABLE after the server imported tqdm: no bar may appear that a real run does not show.
    Run ids, times and figures of a run differ from run to run; the lines' words must not."""
    config = make_config(tmp_path / "ws", dataset={"name": "demo", "max_documents": 1, "max_queries": 3, "seed": 2},
                         retrieval={"legs": ["vector"], "top_k": 5, "latency": "batch"})
    (tmp_path / "small.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    real = shell(None, "kbench run small.yaml --quiet", cwd=tmp_path)
    forked = shell(kbench_server, "kbench run small.yaml --quiet", cwd=tmp_path)
    assert real.returncode == forked.returncode == 0, forked.stderr[-2000:]
    assert "results:" in real.stdout
    assert masked(forked.stdout) == masked(real.stdout) and masked(forked.stderr) == masked(real.stderr)
    assert "\r" not in forked.stderr


def test_a_bar_disabled_after_the_server_imported_tqdm_stays_hidden(probe_forks):
    done = shell(probe_forks, "kbench tqdm")
    assert (done.stdout, done.stderr) == ("3\n", "")


def masked(text: str) -> list[str]:
    return [re.sub(r"[0-9a-f]{6,}|\d+(\.\d+)?", "#", line) for line in text.splitlines()]
