"""The labelling page in a real headless Chromium, keyboard only: grade five pairs with the keys, reload (the same
pair, nothing posted twice), stop the server and start it again on the same labels file (resume: the next pair,
the five grades kept). A screenshot of the page is written beside the test's files (KBENCH_LABEL_SCREENSHOT: also
there)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from kbench.labelling.labels import LabelsFile
from kbench.labelling.page import start_page
from tests.labelling.browser import Chromium

PAIR = "document.querySelector('input[name=pair]') && document.querySelector('input[name=pair]').value"
GRADED = "document.getElementById('left') && document.getElementById('left').textContent"


@pytest.mark.browser
@pytest.mark.port
def test_grade_five_pairs_by_keyboard_reload_and_resume(demo_pool, tmp_path):
    path = tmp_path / "labels.qrels"
    labels = LabelsFile.open(path, demo_pool, "keyboard")
    running = start_page(labels, 0)
    keys = ["3", "0", "2", "1", "s", "2"]  # five grades and one skip
    seen = []
    try:
        with Chromium() as browser:
            browser.open(running.url)
            for key in keys:
                pair = browser.wait_for(PAIR)
                assert browser.value("document.getElementById('question').textContent") == \
                    demo_pool.questions[demo_pool.pairs[int(pair)].query_id]
                seen.append(int(pair))
                browser.press(key)
                browser.wait_for(f"({PAIR}) && ({PAIR}) !== '{pair}'")
            assert "5 graded" in browser.value(GRADED)
            shown = browser.wait_for(PAIR)
            browser.reload()
            assert browser.wait_for(PAIR) == shown  # a reload shows the same pair and posts nothing
            assert labels.count == 5
            shot = browser.screenshot(tmp_path / "label-page.png")
        lines = path.read_text().splitlines()
        graded = [(p, k) for p, k in zip(seen, keys) if k != "s"]
        assert [ln.split()[3] for ln in lines] == [k for _, k in graded]
        assert [ln.split()[2] for ln in lines] == [demo_pool.pairs[p].pair_id for p, _ in graded]
    finally:
        running.close()

    resumed = LabelsFile.open(path, demo_pool, "keyboard")  # a new server on the same file
    running = start_page(resumed, 0)
    try:
        with Chromium() as browser:
            browser.open(running.url)
            first = int(browser.wait_for(PAIR))
            assert first not in {p for p, k in zip(seen, keys) if k != "s"}
            assert first == resumed.remaining()[0] and seen[4] == resumed.remaining()[-1]  # the skipped one: last
            assert f"{len(demo_pool.pairs) - 5}" in browser.value(GRADED) and "5 graded" in browser.value(GRADED)
    finally:
        running.close()
    assert shot.stat().st_size > 10_000
    if os.environ.get("KBENCH_LABEL_SCREENSHOT"):
        shutil.copy(shot, Path(os.environ["KBENCH_LABEL_SCREENSHOT"]))
