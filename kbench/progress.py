"""kbench's own progress: a stage's name, items done of the total, the rate and the time left.

    with Progress("embed", total=len(texts), unit="texts", enabled=progress, work=sum(weights)) as bar:
        for batch in batches:
            ...
            bar.advance(len(batch), work=sum(weights of the batch))

On a terminal the line is redrawn in place (at most four times a second) and ends with the stage's totals; anywhere
else (a log file, a pipe, CI) a short stage prints one line when it ends, so a log holds one line per stage and no
carriage returns. Lines go to stderr, results to stdout. Every long stage reports through this one class;
third-party bars are switched off where kbench calls them (sentence-transformers' ``show_progress_bar=False``,
MLflow's artifact bar in ``tracking.read``), so nothing else draws.

A long stage says so before it has run long (issue 53: 68 minutes of mpnet embedding with no line for 45):

- **an estimate**, once its first batch is done: that batch is timed and the rest projected from it (by ``work``,
  a cost per item such as characters, when the items differ in size: texts are embedded longest first, so a count
  of items would overstate the rest). ``estimate_line``: ``embed: 1,029 texts, about 12m at 1.4 texts/s (timed
  on the first 64); a line at least every minute``. Printed when the projection is ``ESTIMATE_FROM_S`` or more;
- **a line at least every** ``LINE_EVERY_S`` seconds in a log, from a heartbeat that does not wait for the next
  batch (a batch of 64 mpnet texts on a busy CPU takes minutes), and a redraw every ``REDRAW_IDLE_S`` on a terminal.

Training (kbench/training/reranker.py) reports steps through ``estimate_line`` and ``LINE_EVERY_S`` too.
"""
from __future__ import annotations

import sys
import threading
import time
from typing import IO, Iterable, Iterator, TypeVar

T = TypeVar("T")
REDRAW_S = 0.25  # a terminal line is redrawn at most this often
REDRAW_IDLE_S = 2.0  # ... and at least this often while a batch runs (the elapsed time and time left move)
LINE_EVERY_S = 30.0  # a log gets a line at least this often while a stage runs (a minute at most between two)
ESTIMATE_FROM_S = 20.0  # a stage projected to take this long says so once its first batch is timed


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
    if per_s < 0.5:  # "0.0 steps/s" says nothing: the time each takes does ("22.0s a step")
        one = unit[:-3] + "y" if unit.endswith("ies") else unit[:-1] if unit.endswith("s") else unit
        return f"{duration(seconds / count)} {'an' if one[:1] in 'aeiou' else 'a'} {one}"
    return f"{per_s:,.0f} {unit}/s" if per_s >= 100 else f"{per_s:.1f} {unit}/s"


def estimate_line(stage: str, total: int, unit: str, seconds: float, done: int, *, work_share: float | None = None,
                  every_s: float | None = LINE_EVERY_S) -> str:
    """``embed: 1,029 texts, about 12m at 1.4 texts/s (timed on the first 64); a line at least every 30s``: the
    whole stage projected from its first ``done`` items, timed at ``seconds`` (``work_share``: the share of the
    stage's work they were, when items differ in size; else ``done / total``; ``every_s``: how often a log gets a
    line, None on a terminal)."""
    share = work_share if work_share else done / max(total, 1)
    projected = seconds / share if share > 0 else float("inf")
    speed = rate(total, projected, unit)
    return (f"{stage}: {total:,} {unit}, about {duration(projected)}" + (f" at {speed}" if speed else "")
            + f" (timed on the first {done:,})" + (f"; a line at least every {duration(every_s)}" if every_s else ""))


class Progress:
    """One stage's progress line. ``enabled=False`` (``--quiet``) prints nothing at all. ``work``: the stage's total
    cost in any unit (characters), when items differ in size; ``advance(n, work=...)`` then says each batch's."""

    def __init__(self, stage: str, total: int | None = None, unit: str = "items", *, enabled: bool = True,
                 stream: IO[str] | None = None, interactive: bool | None = None, work: float | None = None,
                 line_every_s: float = LINE_EVERY_S, estimate_from_s: float = ESTIMATE_FROM_S,
                 heartbeat: bool = True):
        self.stage, self.total, self.unit, self.enabled = stage, total, unit, enabled
        self.stream = stream if stream is not None else sys.stderr
        self.interactive = (interactive if interactive is not None
                            else bool(getattr(self.stream, "isatty", lambda: False)()))
        self.done = 0
        self.work, self.work_done = work, 0.0
        self.line_every_s, self.estimate_from_s = line_every_s, estimate_from_s
        self.started = time.perf_counter()
        self._drawn_at = 0.0
        self._lined_at = self.started  # a log's last line
        self._estimated = False
        self._closed = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._beat = None
        if heartbeat and enabled and total:  # lines while a long batch runs, not only when it ends
            self._beat = threading.Thread(target=self._heartbeat, name=f"progress-{stage}", daemon=True)

    def __enter__(self) -> "Progress":
        self._draw(force=True)
        if self._beat is not None:
            self._beat.start()
        return self

    def __exit__(self, kind, error, tb) -> None:
        self.close(stopped=kind is not None)

    def advance(self, count: int = 1, work: float | None = None) -> None:
        with self._lock:
            self.done += count
            if work is not None:
                self.work_done += work
            self._estimate()
            self._draw()

    def _share(self) -> float | None:
        """The share of the stage's work done (by ``work`` when given, else by items); None before anything."""
        if self.work and self.work_done:
            return min(self.work_done / self.work, 1.0)
        if self.total and self.done:
            return self.done / self.total
        return None

    def left_s(self) -> float | None:
        share = self._share()
        if share is None or share >= 1:
            return None
        return (time.perf_counter() - self.started) * (1 - share) / share

    def running_line(self) -> str:
        elapsed = time.perf_counter() - self.started
        of = f"/{self.total:,}" if self.total is not None else ""
        parts = [f"{self.stage}: {self.done:,}{of} {self.unit}"]
        if speed := rate(self.done, elapsed, self.unit):
            parts.append(speed)
        if self.total and self.done and self.done < self.total and (left := self.left_s()) is not None:
            parts.append(f"{duration(left)} left")
        elif not self.done and elapsed >= 1:
            parts.append(f"{duration(elapsed)} on the first batch")
        return ", ".join(parts)

    def final_line(self, stopped: bool = False) -> str:
        elapsed = time.perf_counter() - self.started
        of = f" of {self.total:,}" if stopped and self.total is not None else ""
        speed = rate(self.done, elapsed, self.unit)
        line = f"{self.stage}: {self.done:,}{of} {self.unit} in {duration(elapsed)}" + (f" ({speed})" if speed else "")
        return line + (", stopped" if stopped else "")

    def _estimate(self) -> None:
        """Once the first batch is done: the projection, when the stage looks long (``estimate_line``)."""
        if self._estimated or not self.enabled or not self.total or not self.done or self.done >= self.total:
            return
        self._estimated = True
        elapsed = time.perf_counter() - self.started
        share = self._share()
        if share and elapsed / share >= self.estimate_from_s:
            self._write_line(estimate_line(self.stage, self.total, self.unit, elapsed, self.done,
                                           work_share=share if self.work else None,
                                           every_s=None if self.interactive else self.line_every_s))

    def _write_line(self, line: str) -> None:
        """A whole line: above the redrawn one on a terminal, on its own in a log."""
        self.stream.write(("\r\033[K" if self.interactive else "") + line + "\n")
        self.stream.flush()
        self._lined_at = time.perf_counter()
        if self.interactive:
            self._draw(force=True)

    def _draw(self, force: bool = False) -> None:
        if not (self.enabled and self.interactive) or self._closed:
            return
        now = time.perf_counter()
        if force or now - self._drawn_at >= REDRAW_S:
            self._drawn_at = now
            self.stream.write("\r\033[K" + self.running_line())
            self.stream.flush()

    def tick(self) -> None:
        """What the heartbeat does (tests call it): a terminal's line redrawn; a log's line written when
        ``line_every_s`` passed without one."""
        with self._lock:
            if self._closed or not self.enabled:
                return
            if self.interactive:
                self._draw(force=True)
            elif time.perf_counter() - self._lined_at >= self.line_every_s:
                self._write_line(self.running_line())

    def _heartbeat(self) -> None:
        every = REDRAW_IDLE_S if self.interactive else min(self.line_every_s, 5.0)
        while not self._stop.wait(every):
            self.tick()

    def close(self, stopped: bool = False) -> None:
        """The stage's one line: done, in how long, at what rate (``stopped`` when it ended early)."""
        self._stop.set()
        with self._lock:
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
