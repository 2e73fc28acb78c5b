"""The labelling page: one (question, passage) pair at a time, served by kbench on 127.0.0.1 with the standard library.

    running = start_page(labels, port=0)      # labels: a LabelsFile; port 0: any free port
    running.url                                # http://127.0.0.1:PORT/
    running.close()

- ``GET /`` gives a tab its own token (a redirect to ``/?tab=...``); ``GET /?tab=T`` shows the pair leased to that
  tab (a reload shows the same pair), else leases the next pair no one holds. The page is whole HTML rendered
  here: the question, the passage marked inside its document's text, the grade scale as buttons of a plain form,
  the count left. JavaScript only adds the keys (0-3, or 0-1, and ``s`` for skip); with it off the buttons work.
- ``POST /grade`` (form fields ``tab``, ``pair``, ``grade``: a grade of the scale or ``skip``) appends the grade
  to the labels file (fsynced) unless the pair already holds one, then redirects to the tab's next pair (303), so
  a reload never posts twice.
- A lease per pair and tab: two tabs are never shown the same pair while both are open; a lease left by a closed
  tab lapses after ``LEASE_S``. Whatever the leases, a pair is written at most once (``LabelsFile.add``).
- ``GET /status``: the counts and the current estimate as JSON.
"""
from __future__ import annotations

import html
import json
import secrets
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable
from urllib.parse import parse_qs, urlsplit

from kbench.labelling.estimate import estimate_labels
from kbench.labelling.labels import LabelsFile

LEASE_S = 600.0  # a tab that shows a pair this long without grading it lets it go
MAX_FORM_BYTES = 4096
SHOWN_CONTEXT = 280  # characters of the document shown on each side of the passage (the pool keeps more)
TOKEN_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")


class Leases:
    """pair -> (tab, since); tab -> pair. Held under one lock with the labels file's own."""

    def __init__(self, lease_s: float = LEASE_S):
        self.lease_s = lease_s
        self._by_pair: dict[int, tuple[str, float]] = {}
        self._by_tab: dict[str, int] = {}
        self._lock = threading.Lock()

    def pair_for(self, tab: str, labels: LabelsFile) -> int | None:
        """The pair ``tab`` holds (renewed), else the first free one in the order, leased to it; None when none is
        left."""
        with self._lock:
            now = time.monotonic()
            held = self._by_tab.get(tab)
            if held is not None and not labels.graded(held) and self._by_pair.get(held, ("", 0))[0] == tab:
                self._by_pair[held] = (tab, now)
                return held
            self._by_tab.pop(tab, None)
            for pair in labels.remaining():
                owner = self._by_pair.get(pair)
                if owner is None or owner[0] == tab or now - owner[1] > self.lease_s:
                    if owner is not None:
                        self._by_tab.pop(owner[0], None)
                    self._by_pair[pair] = (tab, now)
                    self._by_tab[tab] = pair
                    return pair
            return None

    def release(self, tab: str, pair: int) -> None:
        with self._lock:
            if self._by_pair.get(pair, ("",))[0] == tab:
                del self._by_pair[pair]
            if self._by_tab.get(tab) == pair:
                del self._by_tab[tab]

    def held_by_other(self, tab: str, pair: int) -> bool:
        with self._lock:
            owner = self._by_pair.get(pair)
            return owner is not None and owner[0] != tab and time.monotonic() - owner[1] <= self.lease_s


STYLE = """
body{font:16px/1.5 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
header{background:#1d2330;color:#fff;padding:.6em 1.2em;display:flex;justify-content:space-between;flex-wrap:wrap}
header b{font-weight:600}main{max-width:60em;margin:1em auto;padding:0 1em}
.question{font-size:1.25em;font-weight:600;background:#fff;border-left:5px solid #3b6fd8;padding:.7em 1em;margin:0 0 1em}
.doc{background:#fff;padding:1em;border:1px solid #d8dce3;max-height:55vh;overflow:auto;position:relative;white-space:pre-wrap}
.doc h2{font-size:1em;margin:0 0 .5em;color:#555}.context{color:#6b7280}
mark{background:#fff1a8;color:#1d2330;padding:.1em 0;outline:2px solid #e8c400}
form{margin:1em 0;display:flex;gap:.5em;flex-wrap:wrap}
button{font:inherit;padding:.6em .9em;border:1px solid #b7bfcc;background:#fff;cursor:pointer;text-align:left;flex:1 1 12em}
button:hover,button:focus{border-color:#3b6fd8;outline:2px solid #3b6fd8}
button kbd{font-weight:700;background:#1d2330;color:#fff;padding:0 .4em;margin-right:.4em;border-radius:3px}
button.skip{flex:0 0 auto;color:#555}.note{background:#fff4e5;border:1px solid #f0b35a;padding:.5em 1em}
.meta{color:#555;font-size:.9em}.done{background:#fff;padding:2em;text-align:center}
"""

SCRIPT = """
var passage = document.getElementById('passage'), box = document.getElementById('document');
if (passage && box) box.scrollTop = Math.max(0, passage.offsetTop - 48);  // the page stays put
document.addEventListener('keydown', function (e) {
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  var key = e.key === 'S' ? 's' : e.key;
  var button = document.querySelector('button[data-key="' + key + '"]');
  if (button) { e.preventDefault(); button.click(); }
});
"""


def render_pair(labels: LabelsFile, pair: int, tab: str, note: str = "") -> str:
    pool = labels.pool
    p = pool.pairs[pair]
    left = len(labels.remaining())
    position, stream = labels.position(pair), labels.stream(pair)
    why = ("random share: a whole question, so the interval stays unbiased" if stream == "random"
           else "active: its grade could change which config is best")
    buttons = "".join(
        f'<button type="submit" name="grade" value="{g}" data-key="{g}"><kbd>{g}</kbd>{html.escape(meaning)}</button>'
        for g, meaning in pool.grades.items())
    title = f"<h2>{html.escape(p.title)} <span class=meta>({html.escape(p.doc_id)})</span></h2>" if p.title else \
        f"<h2>{html.escape(p.doc_id)}</h2>"
    shown_before, shown_after = p.before[-SHOWN_CONTEXT:], p.after[:SHOWN_CONTEXT]
    before = ("…" if len(shown_before) < p.start else "") + html.escape(shown_before)
    after = html.escape(shown_after) + ("…" if shown_after else "")
    note_html = f'<p class="note" role="status">{html.escape(note)}</p>' if note else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>kbench label: {left} left</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{STYLE}</style></head>
<body><header><span><b>kbench label</b> · {html.escape(pool.dataset)} · {html.escape(labels.annotator)}</span>
<span id="left"><b>{left}</b> left of {len(pool.pairs)} · {labels.count} graded</span></header>
<main>{note_html}
<p class="question" id="question">{html.escape(pool.questions[p.query_id])}</p>
<p>How well does the <mark>marked passage</mark> below answer this question? Judge the marked passage only; the grey
text around it is its document, for context.</p>
<form method="post" action="/grade" id="grades">
<input type="hidden" name="tab" value="{tab}"><input type="hidden" name="pair" value="{pair}">
{buttons}<button type="submit" class="skip" name="grade" value="skip" data-key="s"><kbd>s</kbd>skip</button>
</form>
<div class="doc" id="document">{title}<span class="context">{before}</span><mark id="passage">{html.escape(p.text)}</mark><span class="context">{after}</span></div>
<p class="meta">Keys: {' '.join(map(str, pool.grades))} grade, s skip (or click). Pair {position + 1} of the order:
{why}. Every grade is saved at once to {html.escape(str(labels.path))}; close the page whenever you like, the next
start goes on from here.</p>
</main><script>{SCRIPT}</script></body></html>"""


def render_done(labels: LabelsFile, lines: list[str]) -> str:
    text = html.escape("\n".join(lines))
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>kbench label: done</title>
<style>{STYLE}</style></head><body><header><span><b>kbench label</b></span><span id="left"><b>0</b> left of
{len(labels.pool.pairs)} · {labels.count} graded</span></header><main><div class="done"><p>Every pair is graded or
held by another tab. Thank you.</p></div><pre>{text}</pre></main></body></html>"""


def make_handler(labels: LabelsFile, leases: Leases, log: Callable[[str], None] | None):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 30

        def log_message(self, *args):
            pass

        def _send(self, status: int, body: str, content_type: str = "text/html; charset=utf-8",
                  headers: dict | None = None) -> None:
            payload = body.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("Cache-Control", "no-store")
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(payload)

        def _redirect(self, where: str) -> None:
            self._send(303, "", headers={"Location": where})

        def do_GET(self):  # noqa: N802
            url = urlsplit(self.path)
            query = parse_qs(url.query)
            if url.path == "/status":
                self._send(200, json.dumps(status(labels)), "application/json")
                return
            if url.path != "/":
                self._send(404, "<p>no such page: go to <a href='/'>/</a></p>")
                return
            tab = (query.get("tab") or [""])[0]
            if not tab or not set(tab) <= TOKEN_CHARS or len(tab) > 64:
                self._redirect(f"/?tab={secrets.token_urlsafe(9)}")
                return
            pair = leases.pair_for(tab, labels)
            if pair is None:
                self._send(200, render_done(labels, estimate_lines(labels)))
                return
            note = {"taken": "That pair was graded in another tab; here is the next one.",
                    "saved": ""}.get((query.get("note") or [""])[0], "")
            self._send(200, render_pair(labels, pair, tab, note))

        def do_POST(self):  # noqa: N802
            if urlsplit(self.path).path != "/grade":
                self._send(404, "<p>no such form</p>")
                return
            length = self.headers.get("Content-Length", "0")
            if not length.isdigit() or int(length) > MAX_FORM_BYTES:
                self.close_connection = True
                self._send(400, "<p>a grade is a small form: send it from the page</p>")
                return
            form = parse_qs(self.rfile.read(int(length)).decode("utf-8", "replace"))
            tab, pair, grade = (form.get(k, [""])[0] for k in ("tab", "pair", "grade"))
            if not tab or not set(tab) <= TOKEN_CHARS or not pair.isdigit() or int(pair) >= len(labels.pool.pairs):
                self._send(400, "<p>that form did not come from this page: <a href='/'>start again</a></p>")
                return
            pair_index = int(pair)
            if grade == "skip":
                labels.skip(pair_index)
                leases.release(tab, pair_index)
                self._redirect(f"/?tab={tab}")
                return
            if not grade.isdigit() or int(grade) not in labels.pool.grades:
                self._send(400, f"<p>grade {html.escape(grade[:10])} is not on the scale: <a href='/?tab={tab}'>"
                                "back</a></p>")
                return
            if leases.held_by_other(tab, pair_index):
                self._redirect(f"/?tab={tab}&note=taken")
                return
            written = labels.add(pair_index, int(grade))
            leases.release(tab, pair_index)
            if log is not None and written:
                log(f"kbench label: {labels.count} graded ({labels.pool.pairs[pair_index].pair_id}: {grade})")
            self._redirect(f"/?tab={tab}" + ("" if written else "&note=taken"))

    return Handler


def estimate_lines(labels: LabelsFile) -> list[str]:
    pool = labels.pool
    return estimate_labels(pool.arrays(), pool.plan, labels.grades(), binary_human=pool.scale == "binary").lines()


def status(labels: LabelsFile) -> dict:
    return {"pairs": len(labels.pool.pairs), "graded": labels.count, "left": len(labels.remaining()),
            "labels": str(labels.path), "estimate": estimate_lines(labels)}


@dataclass
class RunningPage:
    server: ThreadingHTTPServer
    thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def start_page(labels: LabelsFile, port: int = 0, *, background: bool = True, lease_s: float = LEASE_S,
               log: Callable[[str], None] | None = None) -> RunningPage:
    """Bind 127.0.0.1:``port`` (0: any free port) and serve the page; OSError when the port is taken."""
    server = ThreadingHTTPServer(("127.0.0.1", port), make_handler(labels, Leases(lease_s), log))
    server.daemon_threads = True
    running = RunningPage(server)
    if background:
        running.thread = threading.Thread(target=server.serve_forever, daemon=True)
        running.thread.start()
    return running


__all__ = ["LEASE_S", "Leases", "RunningPage", "render_pair", "start_page", "status"]
