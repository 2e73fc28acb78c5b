"""kbench's own progress: a stage's name, items done of the total, the rate and the time left.

    with Progress("embed", total=len(texts), unit="texts", enabled=progress) as bar:
        for batch in batches:
            ...
            bar.advance(len(batch))

On a terminal the line is redrawn in place (at most four times a second) and ends with the stage's totals; anywhere
else (a log file, a pipe, CI) nothing is printed while the stage runs and one line when it ends, so a log holds one
line per stage and no carriage returns. Lines go to stderr, results to stdout. Every long stage reports through
this one class; third-party bars are switched off where kbench calls them (sentence-transformers'
``show_progress_bar=False``, MLflow's artifact bar in ``tracking.read``), so nothing else draws.
"""
from __future__ import annotations

import sys
import time
from typing import IO, Iterable, Iterator, TypeVar

T = TypeVar("T")
REDRAW_S = 0.25  # a terminal line is redrawn at most this often


def duration(seconds: float) -> str:
    """``12.3s``, ``4m05s``, ``1h02m``: a duration as a person reads it."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def rate(count: float, seconds: float, unit: str) -> str:
    if seconds <= 0 or count <= 0:
        return ""
    per_s = count / seconds
    return f"{per_s:,.0f} {unit}/s" if per_s >= 100 else f"{per_s:.1f} {unit}/s"


class Progress:
    """One stage's progress line. ``enabled=False`` (``--quiet``) prints nothing at all."""

    def __init__(self, stage: str, total: int | None = None, unit: str = "items", *, enabled: bool = True,
                 stream: IO[str] | None = None, interactive: bool | None = None):
        self.stage, self.total, self.unit, self.enabled = stage, total, unit, enabled
        self.stream = stream if stream is not None else sys.stderr
        self.interactive = (interactive if interactive is not None
                            else bool(getattr(self.stream, "isatty", lambda: False)()))
        self.done = 0
        self.started = time.perf_counter()
        self._drawn_at = 0.0
        self._closed = False

    def __enter__(self) -> "Progress":
        self._draw(force=True)
        return self

    def __exit__(self, kind, error, tb) -> None:
        self.close(stopped=kind is not None)

    def advance(self, count: int = 1) -> None:
        self.done += count
        self._draw()

    def running_line(self) -> str:
        elapsed = time.perf_counter() - self.started
        of = f"/{self.total:,}" if self.total is not None else ""
        parts = [f"{self.stage}: {self.done:,}{of} {self.unit}"]
        if speed := rate(self.done, elapsed, self.unit):
            parts.append(speed)
        if self.total and self.done and self.done < self.total:
            parts.append(f"{duration(elapsed * (self.total - self.done) / self.done)} left")
        return ", ".join(parts)

    def final_line(self, stopped: bool = False) -> str:
        elapsed = time.perf_counter() - self.started
        of = f" of {self.total:,}" if stopped and self.total is not None else ""
        speed = rate(self.done, elapsed, self.unit)
        line = f"{self.stage}: {self.done:,}{of} {self.unit} in {duration(elapsed)}" + (f" ({speed})" if speed else "")
        return line + (", stopped" if stopped else "")

    def _draw(self, force: bool = False) -> None:
        if not (self.enabled and self.interactive) or self._closed:
            return
        now = time.perf_counter()
        if force or now - self._drawn_at >= REDRAW_S:
            self._drawn_at = now
            self.stream.write("\r\033[K" + self.running_line())
            self.stream.flush()

    def close(self, stopped: bool = False) -> None:
        """The stage's one line: done, in how long, at what rate (``stopped`` when it ended early)."""
        if self._closed:
            return
        self._closed = True
        if not self.enabled:
            return
        self.stream.write(("\r\033[K" if self.interactive else "") + self.final_line(stopped) + "\n")
        self.stream.flush()


def track(items: Iterable[T], stage: str, total: int | None = None, unit: str = "items", *,
          enabled: bool = True) -> Iterator[T]:
    """``items``, reporting one per item: ``for query in track(queries, "search", len(queries), "queries")``."""
    with Progress(stage, total, unit, enabled=enabled) as bar:
        for item in items:
            yield item
            bar.advance()
