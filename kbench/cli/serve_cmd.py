"""kbench serve: a local OpenAI-compatible endpoint (embeddings from the catalogue, SmolLM2 chat, faults)."""
from __future__ import annotations

import os
import signal
import sys
import threading
import time

from kbench import serve as serving
from kbench.cli import add_command
from kbench.cli.console import serve_until_interrupted

# One thread: SmolLM2 answered a 19-token request in 5.1 s with one thread and 84 s with torch's default (one per
# core) on a 2-core machine another job kept busy (issue 29); measure yours with benchmarks/serve_threads.py.
DEFAULT_THREADS = 1


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity, which a container or taskset narrows), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def add_parser(sub) -> None:
    p = add_command(sub, "serve")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (loopback only unless --allow-remote)")
    p.add_argument("--port", type=int, default=8000, help="port (0: any free port, printed when ready)")
    p.add_argument("--no-chat", action="store_true", help="serve embeddings only (do not load the chat model)")
    p.add_argument("--fault", action="append", default=[], metavar="KIND[xTIMES][;opt=v]",
                   help="queue a fault for the next requests: 429, 500, slow, quota, malformed "
                        "(e.g. 429x2;retry_after_s=1, quotax-1 for every request)")
    p.add_argument("--allow-remote", action="store_true", help="allow a non-loopback --host (no key is checked)")
    p.add_argument("--threads", type=int, default=DEFAULT_THREADS, metavar="N",
                   help=f"torch threads for the models (default {DEFAULT_THREADS}: on a busy CPU more threads thrash; "
                        "at most the CPUs this process may use; benchmarks/serve_threads.py measures it)")
    p.add_argument("--quiet", action="store_true", help="no request log (one line per request on stderr)")
    p.set_defaults(func=serve)


def say_when_chat_is_ready(state, started: float) -> None:
    """Wait for the background load of the chat model; print that chat answers now, or why it will not."""
    state.chat_ready.wait()
    took = time.monotonic() - started
    if state.chat_error:
        print(f"kbench serve: chat model failed to load after {took:.0f} s: {state.chat_error}; chat requests get "
              "this error, embeddings still answer", flush=True)
    else:
        print(f"kbench serve: chat model ready after {took:.0f} s; chat requests answer now", flush=True)


def serve(args) -> int:
    # `kbench` lets SIGPIPE end a piped command quietly; a server must instead survive a client that hangs up
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    if args.threads < 1:
        print("kbench: error: --threads must be at least 1", file=sys.stderr)
        return 2
    # --threads 10000 was accepted: 19,463 threads, and a 64-text request took 34 s instead of 0.3 s
    if args.threads > (cap := usable_cpus()):
        print(f"kbench: error: --threads {args.threads}: more than the {cap} CPU{'s' if cap > 1 else ''} this "
              f"process may use; give at most {cap} (default {DEFAULT_THREADS}: on a busy CPU more threads thrash)",
              file=sys.stderr)
        return 2
    import torch  # the models' runtime: its thread pool is this server's (a process of its own)

    torch.set_num_threads(args.threads)
    running = serving.start_server(args.host, args.port, chat=not args.no_chat, faults=args.fault,
                                   allow_remote=args.allow_remote, background=False,
                                   log=None if args.quiet else lambda line: print(line, file=sys.stderr, flush=True))
    chat = "off" if args.no_chat else "SmolLM2-135M-Instruct (loading in the background)"
    print(f"kbench serve: ready at {running.base_url} (embeddings: the kbench catalogue; chat: {chat}; "
          f"{args.threads} torch thread{'s' if args.threads > 1 else ''}); Ctrl-C stops", flush=True)
    if not args.no_chat:  # the chat model loads for about 80 s: one line when it answers (or why it cannot)
        threading.Thread(target=say_when_chat_is_ready, args=(running.state, time.monotonic()), daemon=True).start()
    serve_until_interrupted(running.server)
    print("kbench serve: stopped", file=sys.stderr)
    return 0
