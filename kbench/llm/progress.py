"""Progress of an LLM stage on stderr: answers so far, how many were usable, the rate and the time left.

    judge: 12/56 answers (10 usable, 2 unusable, 0 failed; 4 from the cache), 0.21/s, about 3m30s left

On a terminal the line is redrawn in place (at most five times a second); otherwise (a log file, CI, a
notebook's captured stderr) a whole line is written at most every ``LINE_EVERY_S`` seconds and once at the
end, so a log gets a readable line per update and no carriage-return debris. The rate counts answers from
the endpoint only (the cache answers at once). ``KBENCH_PROGRESS=0`` turns it off.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import TextIO

from kbench.progress import ESTIMATE_FROM_S, estimate_line

LINE_EVERY_S = 10.0  # seconds between progress lines when the stream is not a terminal
REDRAW_EVERY_S = 0.2


def duration(seconds: float) -> str:
    """4s, 2m05s, 1h02m."""
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes}m{secs:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


class AnswerProgress:
    """Counts of one stage's answers as they arrive (thread-safe), shown on ``stream``."""

    def __init__(self, label: str, total: int, *, stream: TextIO | None = None, enabled: bool = True,
                 line_every_s: float = LINE_EVERY_S, clock=time.monotonic, estimate_after: int = 1):
        self.label, self.total = label, total
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled and total > 0 and os.environ.get("KBENCH_PROGRESS", "1") != "0"
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.line_every_s = line_every_s
        self._clock = clock
        self._lock = threading.Lock()
        self.usable = self.unusable = self.failed = self.cached = 0
        self._started = clock()
        self._last = -1e9
        self._shown = False  # lines start after ``start()``: answers counted before it (the cache's) say nothing
        self._closed = False
        self.estimate_after = max(1, estimate_after)
        self._asked_at: float | None = None  # start(): when the endpoint is first asked
        self._estimated = False

    @property
    def done(self) -> int:
        return self.usable + self.unusable + self.failed

    def start(self, what: str = "") -> None:
        if self.enabled:
            self._write(f"{self.label}: {self.total} to answer{what}", final=True)
            self._last, self._shown = self._clock(), True
            self._asked_at = self._last

    def add(self, *, usable: bool | None = True, failed: bool = False, cached: bool = False, n: int = 1) -> None:
        """``n`` answers: failed (no answer), else usable or not (None: the stage does not judge, count usable)."""
        with self._lock:
            if failed:
                self.failed += n
            elif usable is False:
                self.unusable += n
            else:
                self.usable += n
            self.cached += n if cached else 0
            now = self._clock()
            self._estimate(now)
            due = now - self._last >= (REDRAW_EVERY_S if self.tty else self.line_every_s)
            if self.enabled and self._shown and due and self.done < self.total:
                self._last = now
                self._write(self.line())

    def _estimate(self, now: float) -> None:
        """Once the first answers from the endpoint are in: the rest projected from them, when it is long."""
        answered = self.done - self.cached
        to_answer = self.total - self.cached
        if (self._estimated or not self.enabled or not self._shown or self._asked_at is None or answered <= 0
                or answered < min(self.estimate_after, to_answer) or self.done >= self.total):
            return
        self._estimated = True
        elapsed = now - self._asked_at
        if elapsed * to_answer / answered >= ESTIMATE_FROM_S:
            self._write(estimate_line(self.label, to_answer, "answers", elapsed, answered,
                                      every_s=None if self.tty else self.line_every_s), final=True)

    def line(self, final: bool = False) -> str:
        elapsed = max(self._clock() - self._started, 1e-9)
        answered = self.done - self.cached
        rate = answered / elapsed
        left = self.total - self.done
        eta = f", about {duration(left / rate)} left" if rate > 0 and left and not final else ""
        cached = f"; {self.cached} from the cache" if self.cached else ""
        return (f"{self.label}: {self.done}/{self.total} answers ({self.usable} usable, {self.unusable} unusable, "
                f"{self.failed} failed{cached}), {rate:.2f}/s{eta}")

    def close(self, note: str = "") -> None:
        with self._lock:
            if self._closed or not self.enabled or not self._shown:
                return
            self._closed = True
            elapsed = duration(self._clock() - self._started)
            self._write(f"{self.line(final=True)}; {elapsed}{note}", final=True)

    def _write(self, text: str, final: bool = False) -> None:
        if self.tty:
            self.stream.write("\r\x1b[2K" + text + ("\n" if final else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
