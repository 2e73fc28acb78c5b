"""Start a real ``kbench serve`` process for tests: one per session (SmolLM2 loads once), on a free port."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import urllib.request
from dataclasses import dataclass

READY = "kbench serve: ready at "


@dataclass
class ServeProcess:
    process: subprocess.Popen
    base_url: str
    banner: str
    log_path: str = ""

    def alive(self) -> str:
        """Empty while running, else its exit code and the end of its log (for an assertion message)."""
        if self.process.poll() is None:
            return ""
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f"kbench serve exited with {self.process.returncode}: {f.read()[-2000:]}"

    def faults(self, kind: str | None = None, times: int = 1, **options) -> None:
        """Queue a fault on the server (kind None: clear the queue)."""
        url = f"{self.base_url}/kbench/faults"
        data = json.dumps({"kind": kind, "times": times, **options}).encode() if kind else None
        request = urllib.request.Request(url, data=data, method="POST" if kind else "DELETE",
                                         headers={"Content-Type": "application/json"})
        urllib.request.urlopen(request, timeout=10).read()

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def start_kbench_serve(*extra: str, timeout_s: float = 120) -> ServeProcess:
    command = [sys.executable, "-c", "import sys; from kbench.cli import main; sys.exit(main())",
               "serve", "--port", "0", *extra]
    log = tempfile.NamedTemporaryFile(prefix="kbench-serve-", suffix=".log", delete=False)  # why it died, if it does
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True,
                               env={**os.environ, "HF_HUB_OFFLINE": "1"})
    found: list[str] = []

    def read() -> None:
        for line in process.stdout:
            if line.startswith(READY):
                found.append(line.strip())
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout_s)
    if not found:
        process.kill()
        raise RuntimeError(f"kbench serve did not say it was ready within {timeout_s} s")
    banner = found[0]
    # keep draining stdout so the server can never block on a full pipe
    threading.Thread(target=lambda: [None for _ in process.stdout], daemon=True).start()
    return ServeProcess(process, banner[len(READY):].split(" ", 1)[0], banner, log.name)
