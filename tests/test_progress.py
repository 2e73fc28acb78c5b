"""kbench's own progress lines: redrawn in place on a terminal, one line per stage anywhere else, nothing with
--quiet; a real run piped to a file holds no carriage return and no third-party bar."""
from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kbench.progress import Progress, duration, track


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_log_gets_one_line_when_the_stage_ends_and_nothing_before():
    log = io.StringIO()
    with Progress("embed", 302, "texts", stream=log) as bar:
        bar.advance(64)
        assert log.getvalue() == ""
        bar.advance(238)
    line = log.getvalue()
    assert line.count("\n") == 1 and "\r" not in line
    assert line.startswith("embed: 302 texts in ") and "texts/s)" in line


def test_a_terminal_gets_the_count_the_rate_and_the_time_left_then_the_total(monkeypatch):
    now = [0.0]
    monkeypatch.setattr("kbench.progress.time.perf_counter", lambda: now[0])
    screen = Terminal()
    with Progress("search", 100, "queries", stream=screen) as bar:
        now[0] = 10.0
        bar.advance(50)
        now[0] = 20.0
        bar.advance(50)
    frames = screen.getvalue().split("\r\033[K")
    assert frames[1] == "search: 0/100 queries"
    assert frames[2] == "search: 50/100 queries, 5.0 queries/s, 10.0s left"
    assert frames[-1] == "search: 100 queries in 20.0s (5.0 queries/s)\n"


def test_quiet_prints_nothing_and_an_early_end_says_stopped():
    silent = Terminal()
    with Progress("embed", 10, "texts", stream=silent, enabled=False) as bar:
        bar.advance(10)
    assert silent.getvalue() == ""
    log = io.StringIO()
    with pytest.raises(RuntimeError):
        with Progress("embed", 10, "texts", stream=log) as bar:
            bar.advance(4)
            raise RuntimeError("model gone")
    assert log.getvalue().startswith("embed: 4 of 10 texts in ") and log.getvalue().endswith(", stopped\n")


def test_track_reports_one_per_item(monkeypatch):
    log = io.StringIO()
    monkeypatch.setattr(sys, "stderr", log)
    assert list(track(range(3), "search", 3, "queries")) == [0, 1, 2]
    assert log.getvalue().startswith("search: 3 queries in ")


def test_durations_read_as_a_person_reads_them():
    assert [duration(s) for s in (4.24, 65, 3725)] == ["4.2s", "1m05s", "1h02m"]


def test_a_run_piped_to_a_file_has_one_line_per_stage_and_no_bar(tmp_path):
    config = {"name": "piped", "workspace": str(tmp_path / "ws"), "dataset": {"name": "demo", "max_documents": 3,
              "max_queries": 5}, "chunking": {"strategy": "fixed", "chunk_size": 300, "chunk_overlap": 0},
              "retrieval": {"legs": ["vector"]}, "tracking": {"enabled": False}}
    path = tmp_path / "piped.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", "import sys; from kbench.cli import console_main; "
                           "sys.exit(console_main())", "run", str(path)], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr[-2000:]
    assert "\r" not in done.stderr and "Batches" not in done.stderr and "%|" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert [line.split(":")[0] for line in lines] == ["embed", "search"], done.stderr
    assert "Warning" not in done.stderr and "warn" not in done.stderr.lower()
