"""Stage markers: with ``KBENCH_TRACE`` naming a file, every stage a run enters and leaves appends one line to it:
``<pid> <unix seconds> begin|end <stage>``.

What it is for: the kill/resume test (tests/reliability/test_kill_resume.py) kills a sweep inside a chosen stage
and names the stage each kill hit; a user sees where a run spends its time or hangs (``tail -f`` the file). Each
line is one ``O_APPEND`` write, so lines of several processes never interleave. Unset (the default), a stage costs
one environment lookup.
"""
from __future__ import annotations

import os
import time
from contextlib import contextmanager

TRACE_ENV = "KBENCH_TRACE"


def _mark(path: str, event: str, stage: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{os.getpid()} {time.time():.6f} {event} {stage}\n".encode())
    finally:
        os.close(fd)


@contextmanager
def traced(stage: str):
    """Mark ``stage``'s begin and end in the ``KBENCH_TRACE`` file, if one is set (an error is marked ``end`` too)."""
    path = os.environ.get(TRACE_ENV)
    if not path:
        yield
        return
    _mark(path, "begin", stage)
    try:
        yield
    finally:
        _mark(path, "end", stage)


class StageTimer:
    """Wall-clock seconds per named stage of a run (``time_s_<stage>`` in MLflow); a stage entered twice adds up.
    Every stage is also ``traced``."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str):
        t = time.perf_counter()
        try:
            with traced(name):  # KBENCH_TRACE: where a run is, for the kill/resume test and a user watching
                yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t
