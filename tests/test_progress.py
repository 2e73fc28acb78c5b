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
    with Progress("search", 100, "queries", stream=screen, estimate_from_s=3600, heartbeat=False) as bar:
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
    # the sample is said first (issue 53 item 1), then one line per stage
    assert lines[0].startswith("kbench: note: dataset demo: 6 of 32 documents (dataset.max_documents: 3: ")
    assert [line.split(":")[0] for line in lines[1:]] == ["embed", "search"], done.stderr
    assert "experiment piped: 5 queries, 6 of 32 documents (dataset.max_documents), " in done.stdout
    assert "Warning" not in done.stderr and "warn" not in done.stderr.lower()


# ------------------------------------------------------------------ issue 53 item 3: estimates, a line every minute
def test_a_long_stage_estimates_from_its_first_batch_by_work_and_a_log_gets_a_line_between_batches(monkeypatch):
    now = [0.0]
    monkeypatch.setattr("kbench.progress.time.perf_counter", lambda: now[0])
    log = io.StringIO()
    # 1,000 texts, the first 100 of them half the characters (the longest first): 40s for half the work
    with Progress("embed", 1000, "texts", stream=log, work=200_000, heartbeat=False) as bar:
        now[0] = 40.0
        bar.advance(100, work=100_000)
        assert log.getvalue() == ("embed: 1,000 texts, about 1m20s at 12.5 texts/s (timed on the first 100); a line "
                                  "at least every 30.0s\n")  # by items it would have said 6m40s
        now[0] = 60.0
        bar.tick()  # 20s since the last line: nothing yet
        assert log.getvalue().count("\n") == 1
        now[0] = 75.0
        bar.tick()  # a batch still running, 35s since the last line: the running line
        assert log.getvalue().splitlines()[1] == "embed: 100/1,000 texts, 1.3 texts/s, 1m15s left"
        now[0] = 90.0
        bar.advance(900, work=100_000)
    assert log.getvalue().splitlines()[-1] == "embed: 1,000 texts in 1m30s (11.1 texts/s)"
    short = io.StringIO()
    with Progress("embed", 10, "texts", stream=short, heartbeat=False) as bar:
        now[0] = 91.0
        bar.advance(5)  # 1s for half: a 2s stage says nothing before its line
        now[0] = 92.0
        bar.advance(5)
    assert short.getvalue().count("\n") == 1


def test_the_heartbeat_writes_while_a_batch_runs():
    """A real thread and a real clock: a batch that outlasts line_every_s still gets its line."""
    import time as clock

    log = io.StringIO()
    with Progress("embed", 64, "texts", stream=log, line_every_s=0.2) as bar:
        clock.sleep(1.2)  # one batch, longer than the interval
        bar.advance(64)
    lines = log.getvalue().splitlines()
    assert len(lines) >= 3 and all(line.startswith("embed: 0/64 texts") for line in lines[:-1])
    assert lines[-2].endswith("on the first batch")
    assert lines[-1].startswith("embed: 64 texts in ")
