"""Fault injection for ``kbench serve``: the failures a hosted API produces, on demand.

A fault is one of:
- ``429``: HTTP 429 rate limit with ``Retry-After: <retry_after_s>``;
- ``500``: HTTP 500;
- ``slow``: the answer comes after ``delay_s`` seconds (longer than a client's timeout);
- ``quota``: HTTP 429 ``insufficient_quota`` (OpenAI's quota-exhausted answer; retrying cannot help);
- ``malformed``: HTTP 200 whose body is not JSON;
- ``pass``: no fault (so a queue can say "two good answers, then the quota is gone": ``passx2``, ``quotax-1``).

Switched **per request** with the header ``X-Kbench-Fault: <kind>[;retry_after_s=N][;delay_s=N]``, or
**per server**: ``kbench serve --fault 429x2`` (or ``POST /v1/kbench/faults`` with
``{"kind": "429", "times": 2}``) queues faults that the next requests (chat or embeddings) receive, one
each; ``times: -1`` makes a fault permanent (any other count is a whole number >= 1; 0 is refused, as a
delay or Retry-After outside 0..3600 s is). ``DELETE /v1/kbench/faults`` clears the queue.
An embeddings input containing ``<<fault:500>>`` fails with a 500 every time (one bad text in a batch).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

from kbench.errors import shorten

KINDS = ("429", "500", "slow", "quota", "malformed", "pass")
MAX_SECONDS = 3600.0  # a delay or Retry-After longer than an hour is a typo, and would hold a thread that long


@dataclass
class Fault:
    kind: str
    times: int = 1  # requests it applies to; -1: every request
    retry_after_s: float = 1.0
    delay_s: float = 5.0

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown fault {shorten(self.kind, 40)}; allowed: {', '.join(KINDS)}")
        if not isinstance(self.times, int) or isinstance(self.times, bool) or (self.times < 1 and self.times != -1):
            raise ValueError(f"fault times: {shorten(self.times, 40)}; give a whole number >= 1, or -1 for every "
                             "request")
        for name in ("retry_after_s", "delay_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_SECONDS:
                raise ValueError(f"fault {name}: {shorten(value, 40)}; give seconds between 0 and {MAX_SECONDS:g}")


def parse_fault(text: str) -> Fault:
    """``429``, ``429x3``, ``slow;delay_s=2``, ``quota x-1`` forms: kind, optional xTIMES, ;key=value."""
    head, *options = [p.strip() for p in text.split(";")]
    kind, _, times = head.partition("x")
    values: dict[str, float] = {}
    for option in options:
        key, _, value = option.partition("=")
        if key not in ("retry_after_s", "delay_s"):
            raise ValueError(f"unknown fault option {shorten(key, 40)}; allowed: retry_after_s, delay_s")
        values[key] = _number(value, key, float)
    return Fault(kind.strip(), _number(times, "times", int) if times.strip() else 1, **values)


def _number(text: str, name: str, kind: type) -> float | int:
    try:
        return kind(text.strip())
    except ValueError:
        raise ValueError(f"fault {name}: {shorten(text, 40)} is not a {'whole ' * (kind is int)}number") from None


class FaultQueue:
    """Faults the next requests receive, in order; thread-safe. Also counts the faults served."""

    def __init__(self):
        self._lock = threading.Lock()
        self._queue: list[Fault] = []
        self.served: dict[str, int] = {}

    def add(self, fault: Fault) -> None:
        with self._lock:
            self._queue.append(fault)

    def clear(self) -> None:
        with self._lock:
            self._queue.clear()

    def next(self) -> Fault | None:
        with self._lock:
            if not self._queue:
                return None
            fault = self._queue[0]
            if fault.times > 0:
                fault.times -= 1
                if fault.times == 0:
                    self._queue.pop(0)
            return fault

    def record(self, fault: Fault) -> None:
        with self._lock:
            self.served[fault.kind] = self.served.get(fault.kind, 0) + 1
