"""The `kbench` a docs page finds first on its PATH: hands this process's command to tests/docs/forkserver.py.

It sends argv, cwd, environment, umask and which of SIGINT/SIGQUIT are ignored, with its own stdin, stdout and
stderr (the descriptors themselves, over the Unix socket), then waits: the forked child writes straight to those
descriptors, so nothing is relayed and a pipe, a redirection or `$?` behaves as with the real `kbench`. SIGINT,
SIGTERM and SIGHUP sent to this process are passed on to the child; this process exits with the child's exit code,
or kills itself with the signal that killed the child, so the shell sees what it would have seen.

When the server cannot be reached or refuses (it would fork from a threaded process), this process becomes the real
`kbench` (exec), so a page still runs, only slower. Only the standard library: it starts in a few milliseconds.
A launcher written by ``ForkServer`` (tests/docs/forkserver.py) runs ``main(SOCKET, REAL_KBENCH, THIS_BIN_DIR)``.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys

HEADER = struct.Struct("!I")
FORWARDED = {signal.SIGINT: True, signal.SIGTERM: False, signal.SIGHUP: False}  # signal -> to the child's group


def request(real_kbench: str, bin_dir: str) -> dict:
    """What the child needs to be this process. PATH loses this launcher's folder: a `kbench` the child starts
    itself is the real one, as a reader's would be."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != bin_dir)
    umask = os.umask(0)
    os.umask(umask)
    ignored = [name for name in ("SIGINT", "SIGQUIT")
               if signal.getsignal(getattr(signal, name)) == signal.SIG_IGN]
    return {"argv": [real_kbench, *sys.argv[1:]], "cwd": os.getcwd(), "env": env, "umask": umask,
            "ignored_signals": ignored}


def read_line(sock: socket.socket) -> dict | None:
    data = b""
    while not data.endswith(b"\n"):
        try:
            chunk = sock.recv(4096)
        except InterruptedError:
            continue
        if not chunk:
            return None
        data += chunk
    return json.loads(data)


def die_like(answer: dict) -> None:
    if "signal" in answer:
        signal.signal(answer["signal"], signal.SIG_DFL)
        os.kill(os.getpid(), answer["signal"])
    sys.exit(answer.get("exit", 1))


def main(socket_path: str, real_kbench: str, bin_dir: str) -> None:
    message = json.dumps(request(real_kbench, bin_dir)).encode()
    # the handlers go in before the child exists: a Ctrl-C that comes before the server sends the child's pid is
    # held and forwarded once it is known, never lost (the child may print before the client reads its pid)
    child: dict = {"pid": None, "held": []}
    for number, to_group in FORWARDED.items():
        if signal.getsignal(number) != signal.SIG_IGN:
            signal.signal(number, lambda sig, _frame, group=to_group: forward(child, sig, group))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(socket_path)
        socket.send_fds(sock, [HEADER.pack(len(message)) + message], [0, 1, 2])
        started = read_line(sock)
    except OSError:
        started = None
    if not started or "pid" not in started:
        sock.close()
        if child["held"]:  # interrupted before anything ran: end as the signal would have ended it
            die_like({"signal": child["held"][0][0]})
        os.execv(real_kbench, [real_kbench, *sys.argv[1:]])  # exec resets the handlers set above
    child["pid"] = started["pid"]
    for sig, group in child["held"]:
        forward(child, sig, group)
    answer = read_line(sock)
    die_like(answer if answer is not None else {"exit": 1})


def forward(child: dict, sig: int, group: bool) -> None:
    if child["pid"] is None:
        child["held"].append((sig, group))
        return
    try:
        os.killpg(child["pid"], sig) if group else os.kill(child["pid"], sig)
    except ProcessLookupError:
        pass
