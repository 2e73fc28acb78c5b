"""The labelling page in a real headless Chromium, keyboard only: grade five pairs with the keys, reload (the same
pair, nothing posted twice), a page of another origin that posts a grade with the tab's own token and secret is
refused (nothing written), stop the server and start it again on the same labels file (resume: the next pair, the
five grades kept, the skipped pair served again soon). A screenshot of the page is written beside the test's files
(KBENCH_LABEL_SCREENSHOT: also there)."""
from __future__ import annotations

import os
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from kbench.labelling.labels import SKIP_AGAIN_AFTER, LabelsFile
from kbench.labelling.page import start_page
from tests.labelling.browser import Chromium

PAIR = "document.querySelector('input[name=pair]') && document.querySelector('input[name=pair]').value"
GRADED = "document.getElementById('left') && document.getElementById('left').textContent"
FIELD = "document.querySelector('input[name={}]').value"


def attacker(target: str, fields: dict) -> ThreadingHTTPServer:
    """Another site (another origin: 127.0.0.1 on another port) whose page posts a grade to ``target`` as soon as
    it loads: a plain form post, which a browser sends without asking."""
    inputs = "".join(f'<input type="hidden" name="{k}" value="{v}">' for k, v in fields.items())
    body = (f'<!doctype html><form method="post" action="{target}">{inputs}</form>'
            "<script>document.forms[0].submit()</script>").encode()

    class Page(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


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
            fields = {name: browser.value(FIELD.format(name)) for name in ("tab", "secret", "pair")}
            other = attacker(running.url + "grade", {**fields, "grade": "0"})  # even with the tab's token leaked
            try:
                browser.open(f"http://127.0.0.1:{other.server_address[1]}/")
                refusal = browser.wait_for("document.getElementById('problem') && "
                                           "document.getElementById('problem').textContent")
            finally:
                other.shutdown()
                other.server_close()
            assert "came from another site" in refusal and "nothing was saved" in refusal
            assert labels.count == 5 and len(path.read_text().splitlines()) == 5
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
            assert first == resumed.remaining()[0]
            # the skipped one comes back after SKIP_AGAIN_AFTER grades; one was given since
            assert resumed.remaining().index(seen[4]) == SKIP_AGAIN_AFTER - 1
            assert f"{len(demo_pool.pairs) - 5}" in browser.value(GRADED) and "5 graded" in browser.value(GRADED)
    finally:
        running.close()
    assert shot.stat().st_size > 10_000
    if os.environ.get("KBENCH_LABEL_SCREENSHOT"):
        shutil.copy(shot, Path(os.environ["KBENCH_LABEL_SCREENSHOT"]))
