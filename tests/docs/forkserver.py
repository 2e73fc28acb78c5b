"""A fork server for the docs pages: kbench's stack imported once, a forked child per `kbench ...` line.

A docs page runs as a reader's shell runs it, and each `kbench` line used to be a process of its own that paid
Python start-up and the imports of its command (sentence-transformers with torch and transformers, MLflow, pandas,
SciPy: about 6 s of CPU) before doing its work. This server imports those once (``PRELOAD``) and, for every request
of ``tests/docs/kbench_client.py`` (the `kbench` put first on the page's PATH), forks a child that becomes that
`kbench` process: the client's own stdin, stdout and stderr (passed over the Unix socket, so a pipe stays a pipe, a
terminal a terminal, a redirection a redirection and ``isatty`` answers as it would), its argv, cwd, environment,
umask and ignored signals. The child runs the installed script's ``console_main`` and exits the way Python exits
(``atexit`` handlers, flushed streams), and the client exits with the child's exit code, or dies of its signal.

What a child must not inherit from the server, and how it does not:
- threads: a child of a threaded process can deadlock on a lock another thread held, so the server forks only
  while Python runs one thread (``threading.active_count() == 1``) and the kernel counts no more threads than the
  imports left (``os_threads()`` from /proc). Those are native pools that prepare for a fork themselves
  (pthread_atfork): OpenBLAS's workers (numpy: measured 1 on 2 cores) and pyarrow's jemalloc background thread; a
  real `kbench` has them too. The preloads are imports only (no model loaded, no torch op run, so no OpenMP pool);
  if a thread appears, the server refuses and the client falls back to the real `kbench` (slower, same result);
- its signal handlers (SIGCHLD, SIGTERM, the wakeup fd): reset to a fresh interpreter's, and SIGINT/SIGQUIT ignored
  when the client's were (bash ignores them for a background job);
- random state: ``random`` reseeds itself after a fork; numpy's and torch's global generators are reseeded here;
- its listening socket and the other clients' connections: closed;
- cwd, os.environ (C-level too, through ``os.environ``), umask: the client's.
- settings libraries read once at import: the server sets what ``console_main`` sets before any library is
  imported (``quiet_libraries()``: no model-loading bars, MLflow at WARNING) before its preloads, as a real `kbench`
  process has them; tqdm reads ``TQDM_*`` (``--quiet`` sets TQDM_DISABLE) when a child's bar starts, not when the
  server imported it (``read_tqdm_settings_when_used``), so `--quiet` shows no bar here either;
What it does inherit and a fresh process would not: the hash seed of str (PYTHONHASHSEED); whatever the preloaded
imports printed once (the server's stderr, not the page's: they print nothing today); and Python's sys.stdin,
sys.stdout and sys.stderr objects, which now write to the line's descriptors but whose buffering was chosen when the
server started (the pages' PYTHONUNBUFFERED=1 makes them unbuffered, as it does in a real process). Its children
skip Python's module teardown (``end_like_python``).

A client that dies (the page's timeout kills its process group with SIGKILL) closes its connection; the server then
kills the child's process group, so no child outlives its page. SIGINT, SIGTERM and SIGHUP sent to the client are
forwarded to the child (SIGINT to its group, as a terminal's Ctrl-C reaches a foreground job).

Run: ``python tests/docs/forkserver.py SOCKET [MODULE:FUNCTION]`` (``ForkServer`` starts one per xdist worker for
tests/docs/test_commands.py); it prints ``ready`` on stdout when it listens.
"""
from __future__ import annotations

import atexit
import importlib
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from kbench.cli.console import quiet_libraries

# what the docs pages' `kbench` lines import, slowest first (python -X importtime of `kbench run
# configs/quickstart.yaml`: sentence_transformers 3.9 s, mlflow.tracking 0.7 s, then the rest together ~1 s)
PRELOAD = [
    "sentence_transformers", "mlflow", "mlflow.tracking", "mlflow.store.db.utils",
    "mlflow.store.tracking.sqlalchemy_store", "matplotlib.figure", "pandas", "scipy.stats", "sklearn", "faiss",
    "kbench", "kbench.cli", "kbench.pipeline", "kbench.evaluation.stage", "kbench.tracking.mlflow_export",
]
ENTRY = "kbench.cli:console_main"  # what the installed `kbench` script runs; tests/docs/test_forkserver.py a probe
HEADER = struct.Struct("!I")  # length of the JSON request that follows


class BecomeChild(Exception):
    """Raised in a freshly forked child to leave the server's loop with a clean stack."""

    def __init__(self, request: dict, fds: list[int]):
        super().__init__()
        self.request, self.fds = request, fds


def os_threads() -> int:
    """Threads of this process as the kernel counts them (Python's and native ones)."""
    return len(os.listdir("/proc/self/task"))


def preload(modules: list[str]) -> list[str]:
    """Import what the pages' commands import; returns those that are not installed (kbench runs without them)."""
    missing = []
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    from kbench.cli import COMMANDS  # every command's module: each is small, and one of them runs per line
    for command in COMMANDS.values():
        importlib.import_module(f"kbench.cli.{command.module}")
    return missing


def read_request(conn: socket.socket) -> tuple[dict, list[int]]:
    """The client's request (argv, cwd, env, umask, ignored signals) and its stdin, stdout, stderr."""
    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
    while len(data) < HEADER.size or len(data) < HEADER.size + HEADER.unpack_from(data)[0]:
        more = conn.recv(1 << 16)
        if not more:
            raise ConnectionError("the client hung up mid-request")
        data += more
    (length,) = HEADER.unpack_from(data)
    return json.loads(data[HEADER.size:HEADER.size + length]), list(fds)


def exit_status(status: int) -> dict:
    if os.WIFSIGNALED(status):
        return {"signal": os.WTERMSIG(status)}
    return {"exit": os.WEXITSTATUS(status)}


def serve(path: str, native_threads: int, entry: str) -> None:
    """Accept clients until SIGTERM; fork a child per request; report each child's end to its client."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake select through the wakeup fd
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    children: dict[int, socket.socket] = {}  # child pid -> its client's connection
    print("ready", flush=True)
    while not stopping:
        try:
            readable, _, _ = select.select([listener, wake_r, *children.values()], [], [], 5)
        except InterruptedError:
            continue
        if wake_r in readable:
            os.read(wake_r, 4096)
        for pid, conn in list(children.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                try:
                    conn.sendall(json.dumps(exit_status(status)).encode() + b"\n")
                except OSError:
                    pass
                conn.close()
                del children[pid]
            elif conn in readable and not conn.recv(1, socket.MSG_PEEK):  # the client died: so does its child
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if listener in readable:
            conn, _ = listener.accept()
            try:
                request, fds = read_request(conn)
            except (OSError, ValueError):
                conn.close()
                continue
            if threading.active_count() != 1 or os_threads() > native_threads:
                try:
                    conn.sendall(json.dumps({"refused": f"{os_threads()} threads"}).encode() + b"\n")
                except OSError:
                    pass
                conn.close()
                for fd in fds:
                    os.close(fd)
                continue
            pid = os.fork()
            if pid == 0:
                for other in [listener, *children.values()]:
                    other.close()
                signal.set_wakeup_fd(-1)
                os.close(wake_r)
                os.close(wake_w)
                conn.close()
                raise BecomeChild({**request, "entry": entry}, fds)
            _lead_its_group(pid)
            for fd in fds:
                os.close(fd)
            try:
                conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
            except OSError:  # the client is gone already: its child must not run on
                os.killpg(pid, signal.SIGKILL)
            children[pid] = conn  # reaped, and its end reported if the client is still there, by the loop
    for pid in children:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _lead_its_group(pid: int) -> None:
    """The child leads a process group of its own (so a dead client's child is killed with what it started); both
    the server and the child set it, so it holds whichever runs first."""
    try:
        os.setpgid(pid, pid)
    except (PermissionError, ProcessLookupError):
        pass


def become(request: dict, fds: list[int]) -> None:
    """Turn this forked child into the client's `kbench` process, then run it as the installed script does."""
    _lead_its_group(0)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    ignored = set(request["ignored_signals"])
    signal.signal(signal.SIGINT, signal.SIG_IGN if "SIGINT" in ignored else signal.default_int_handler)
    signal.signal(signal.SIGQUIT, signal.SIG_IGN if "SIGQUIT" in ignored else signal.SIG_DFL)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.umask(request["umask"])
    reseed()
    read_tqdm_settings_when_used()
    sys.argv = list(request["argv"])
    sys.path[0] = os.path.dirname(sys.argv[0])  # a script's folder leads sys.path: the real kbench's, not this one's
    sys.argv[0] = sys.argv[0].removesuffix(".exe")
    module, _, name = request["entry"].partition(":")
    code = run_like_python(getattr(importlib.import_module(module), name))
    end_like_python(code)


def run_like_python(entry) -> int | str:
    """``sys.exit(entry())`` as the interpreter runs a script: the exit code it ends with, or "SIGINT" for an
    uncaught KeyboardInterrupt (Python then dies of SIGINT, so the shell sees 130)."""
    try:
        code = entry()
    except SystemExit as stop:
        code = stop.code
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        return "SIGINT"
    except BaseException:
        sys.excepthook(*sys.exc_info())
        return 1
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def end_like_python(code: int | str) -> None:
    """Python's exit up to its module teardown: wait for non-daemon threads, run atexit handlers, flush stdio; then
    end at once. Tearing down the preloaded stack (torch, transformers, MLflow) would cost about 2 s a line, which a
    real `kbench --help` never pays as it never imported them; no kbench result depends on it."""
    threading._shutdown()  # what Py_FinalizeEx does first (joins non-daemon threads)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if code == "SIGINT":
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code if isinstance(code, int) else 1)


def read_tqdm_settings_when_used() -> None:
    """tqdm applies ``TQDM_*`` variables to its bars when it is imported (tqdm.utils.envwrap); a `kbench` line
    sets TQDM_DISABLE after the server imported tqdm, so here every bar reads them when it starts, as it would
    have in a process that imported tqdm after they were set."""
    if "tqdm.std" not in sys.modules:
        return
    from tqdm.std import tqdm
    from tqdm.utils import envwrap
    wrapped = tqdm.__dict__["__init__"]
    raw = getattr(wrapped, "func", wrapped)  # envwrap gives a partialmethod around the real __init__
    types = {"total": float, "ncols": int, "miniters": float, "position": int, "nrows": int}  # tqdm.std's own

    def __init__(self, *args, **kwargs):
        envwrap("tqdm", types=types)(raw)(self, *args, **kwargs)

    tqdm.__init__ = __init__


def reseed() -> None:
    """A fresh process's global generators differ from run to run; forked ones would all repeat the server's."""
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    if "torch" in sys.modules:
        sys.modules["torch"].seed()


def main(argv: list[str]) -> None:
    path, entry = argv[1], argv[2] if len(argv) > 2 else ENTRY
    started = time.process_time()
    quiet_libraries()  # before any library is imported, as console_main does (see the module's docstring)
    missing = preload(PRELOAD)
    if threading.active_count() != 1:
        sys.exit(f"forkserver: the preloads started {threading.active_count() - 1} Python threads; forking now "
                 f"could deadlock a child")
    native_threads = os_threads()
    print(f"forkserver: preloaded in {time.process_time() - started:.1f} s CPU, "
          f"{native_threads - 1} native threads"
          + (f" (not installed: {', '.join(missing)})" if missing else ""), file=sys.stderr, flush=True)
    server_pid, child = os.getpid(), None
    try:
        serve(path, native_threads, entry)
    except BecomeChild as forked:
        child = forked
    finally:
        if os.getpid() == server_pid and os.path.exists(path):
            os.unlink(path)
    if child is not None:  # outside the handler: a crash in the child reads as it would in a real process
        become(child.request, child.fds)


class ForkServer:
    """A running fork server and the folder holding its `kbench` launcher (put it first on PATH), for tests."""

    def __init__(self, env: dict[str, str], real_kbench: Path, timeout_s: float = 120, entry: str = ENTRY):
        self.folder = Path(tempfile.mkdtemp(prefix="kbench-fork-"))  # short: a socket path has 108 bytes at most
        self.socket = self.folder / "sock"
        self.bin = self.folder / "bin"
        self.bin.mkdir()
        self.log = self.folder / "server.log"
        with open(self.log, "w", encoding="utf-8") as log:
            self.process = subprocess.Popen([sys.executable, __file__, str(self.socket), entry], env=env, cwd=self.folder,
                                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, text=True)
        ready = self.process.stdout.readline() if self._wait_readable(timeout_s) else ""
        if ready.strip() != "ready":
            said = self.log.read_text(encoding="utf-8")[-2000:]
            self.stop()
            raise RuntimeError(f"the fork server did not start: {said}")
        launcher = self.bin / "kbench"
        launcher.write_text(f"#!{sys.executable} -IS\nimport sys\nsys.path.insert(0, {str(Path(__file__).parent)!r})\n"
                            f"from kbench_client import main\n"
                            f"main({str(self.socket)!r}, {str(real_kbench)!r}, {str(self.bin)!r})\n", encoding="utf-8")
        launcher.chmod(0o755)

    def _wait_readable(self, timeout_s: float) -> bool:
        return bool(select.select([self.process.stdout], [], [], timeout_s)[0])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv)
