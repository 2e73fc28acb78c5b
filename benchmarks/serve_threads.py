"""How fast does `kbench serve` answer a short chat request with each `--threads` value, idle and under load?

For each thread count, one `kbench serve --threads N` process is started (SmolLM2-135M-Instruct, loaded
before timing), one warm-up request is sent, then ``--requests`` identical requests one after another
(``--max-tokens`` new tokens, temperature 0, a judge-sized prompt); the median seconds per answer is printed
with its ratio to the fastest setting. ``--busy K`` starts K processes that spin on the CPU for the whole
measurement (a machine other jobs keep busy: the case where torch's default of one thread per core thrashed,
84 s against 5.1 s with one thread in issue 29). Compare the two runs to choose the default
(``kbench/cli/serve_cmd.py: DEFAULT_THREADS``).

    .venv/bin/python benchmarks/serve_threads.py                          # idle: threads 1, 2, all cores
    .venv/bin/python benchmarks/serve_threads.py --busy 2                 # under load: 2 CPU spinners
    .venv/bin/python benchmarks/serve_threads.py --threads 1,2 --requests 2 --max-tokens 4   # a quick check
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

READY = "kbench serve: ready at "
PROMPT = ("Judge how relevant a passage is to a search query, on a scale from 0 to 3.\n\nQuery: how are failed jobs "
          "retried\n\nPassage:\nFailed jobs are retried three times with exponential backoff; after the last "
          "attempt the job moves to the dead-letter queue.\n\nAnswer in this form only:\n##final score: <0-3>")


def spin(stop) -> None:
    while not stop.is_set():
        pass


def start(threads: int) -> tuple[subprocess.Popen, str]:
    command = [sys.executable, "-c", "import sys; from kbench.cli import main; sys.exit(main())",
               "serve", "--port", "0", "--threads", str(threads), "--quiet"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                               env={**os.environ, "HF_HUB_OFFLINE": "1"})
    for line in process.stdout:
        if line.startswith(READY):
            threading.Thread(target=lambda: [None for _ in process.stdout], daemon=True).start()
            return process, line[len(READY):].split(" ", 1)[0]
    raise RuntimeError("kbench serve did not start")


def ask(base_url: str, max_tokens: int) -> float:
    body = json.dumps({"model": "SmolLM2-135M-Instruct", "max_tokens": max_tokens, "temperature": 0,
                       "messages": [{"role": "user", "content": PROMPT}]}).encode()
    request = urllib.request.Request(f"{base_url}/chat/completions", data=body,
                                     headers={"Content-Type": "application/json", "Authorization": "Bearer local"})
    started = time.perf_counter()
    urllib.request.urlopen(request, timeout=1800).read()
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default=f"1,2,{os.cpu_count()}", help="comma-separated thread counts")
    parser.add_argument("--requests", type=int, default=5, help="timed requests per setting (default 5)")
    parser.add_argument("--max-tokens", type=int, default=19, help="new tokens per answer (default 19)")
    parser.add_argument("--busy", type=int, default=0, metavar="K", help="CPU spinner processes during the run")
    args = parser.parse_args()
    counts = sorted({int(t) for t in args.threads.split(",")})
    stop = multiprocessing.Event()
    spinners = [multiprocessing.Process(target=spin, args=(stop,), daemon=True) for _ in range(args.busy)]
    for p in spinners:
        p.start()
    results = {}
    try:
        for threads in counts:
            process, base_url = start(threads)
            try:
                ask(base_url, args.max_tokens)  # waits for the model to load; warms it up
                times = [ask(base_url, args.max_tokens) for _ in range(args.requests)]
            finally:
                process.terminate()
                process.wait(timeout=30)
            results[threads] = statistics.median(times)
    finally:
        stop.set()
        for p in spinners:
            p.join(timeout=5)
    best = min(results.values())
    load = os.getloadavg()[0]
    print(f"kbench serve, SmolLM2-135M-Instruct, {args.max_tokens} new tokens, median of {args.requests} requests; "
          f"{args.busy} CPU spinners, {os.cpu_count()} cores, load average {load:.2f} at the end")
    for threads, seconds in results.items():
        print(f"  --threads {threads:<3} {seconds:8.2f} s per answer   {seconds / best:5.2f}x the fastest")
    return 0


if __name__ == "__main__":
    sys.exit(main())
