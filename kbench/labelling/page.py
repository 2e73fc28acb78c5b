"""The labelling page: one (question, passage) pair at a time, served by kbench on 127.0.0.1 with the standard library.

    running = start_page(labels, port=0)      # labels: a LabelsFile; port 0: any free port
    running.url                                # http://127.0.0.1:PORT/
    running.close()

- ``GET /`` gives a tab its own token (a redirect to ``/?tab=...``; tokens come from ``secrets``, and the server
  remembers the last ``MAX_TABS`` it issued); ``GET /?tab=T`` shows the pair leased to that tab (a reload shows the
  same pair), else leases the next pair no one holds. The page is whole HTML rendered here: the question (and,
  for a generated one, where the set made it), the passage as one highlighted block inside its document's text,
  the grade scale as buttons of a plain form, the count left and the questions still to label before the first
  interval and before the decision. JavaScript only adds the keys (0-3, or 0-1, and ``s`` for skip); with it off
  the buttons work. Every text from the documents is escaped: no markup of theirs reaches the page.
- ``POST /grade`` (form fields ``tab``, ``secret``, ``pair``, ``grade``: a grade of the scale or ``skip``) appends
  the grade to the labels file (one fsynced line) unless the pair already holds one, then redirects to the tab's
  next pair (303), so a reload never posts twice.
- **Only the page writes**: a post needs a tab token this server issued, the server's form secret (a hidden field
  of every page it serves; per server start) and an ``Origin`` (or, without one, a ``Referer``) that is the page's
  own ``http://127.0.0.1:PORT`` (or ``localhost:PORT``); anything else is refused (403, one line, nothing
  written). A form another site posts to 127.0.0.1 (a "simple" request: no preflight) has neither the token nor
  the secret, and names its own origin. Every request must name the page's own host (a DNS-rebound name is
  refused); the page may not be framed; ``GET /status`` (the counts and the estimate, as JSON) sends no CORS
  header and refuses a request a browser marks as another site's (``Sec-Fetch-Site``), such as a ``<script>``
  include.
- **The labeller is told**: a grade that cannot be written (disk full, read-only, the file gone) answers an error
  page naming the file and the fix, prints one line on the terminal, and the pair stays ungraded. A malformed
  request (a bad ``Content-Length``, a bad form) gets a 400 and no traceback.
- A lease per pair and tab: two tabs are never shown the same pair while both are open; a lease left by a closed
  tab lapses after ``LEASE_S``. Whatever the leases, a pair is written at most once (``LabelsFile.add``), and one
  process serves a labels file (``LabelsLock``: a second ``kbench label`` on it is refused with one line).
"""
from __future__ import annotations

import errno
import hmac
import html
import json
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable
from urllib.parse import parse_qs, urlsplit

from kbench.errors import quoted_token
from kbench.labelling.estimate import LabelEstimate, estimate_labels
from kbench.labelling.labels import SKIP_AGAIN_AFTER, LabelsFile, LabelsLock, encode_id

LEASE_S = 600.0  # a tab that shows a pair this long without grading it lets it go
MAX_FORM_BYTES = 4096
MAX_TABS = 1024  # tab tokens remembered (the least recently used forgotten first: its page asks to be reopened)
LISTEN_BACKLOG = 128  # connections the kernel queues before the page accepts them (many tabs at once)
SHOWN_CONTEXT = 280  # characters of the document shown on each side of the passage (the pool keeps more)
TOKEN_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")
# what to do when a grade cannot be written, by errno
WRITE_FIXES = {
    errno.ENOSPC: "the disk is full: free space on it, then press the grade again",
    errno.EDQUOT: "the disk quota is used up: free space, then press the grade again",
    errno.EROFS: "the file system is read-only: remount it writable, or stop the page and start it again with "
                 "--labels on a writable disk",
    errno.EACCES: "no permission to write it: make it writable (chmod u+w), then press the grade again",
    errno.EPERM: "the system refused the write: make the file yours and writable, then press the grade again",
    errno.ENOENT: "the file is gone (deleted or moved while the page ran): stop the page (Ctrl-C) and put it back, "
                  "then start it again",
    errno.EIO: "the disk reported an I/O error: check the disk, then press the grade again",
}


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


class IssuedTabs:
    """The tab tokens this server issued (``secrets.token_urlsafe``), the ``MAX_TABS`` most recently used."""

    def __init__(self, limit: int = MAX_TABS):
        self.limit = limit
        self._tabs: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def issue(self) -> str:
        tab = secrets.token_urlsafe(16)
        with self._lock:
            self._tabs[tab] = None
            while len(self._tabs) > self.limit:
                self._tabs.popitem(last=False)
        return tab

    def known(self, tab: str) -> bool:
        with self._lock:
            if tab not in self._tabs:
                return False
            self._tabs.move_to_end(tab)
            return True


class Estimates:
    """The labels' estimate, computed again only when a grade or a skip changed them (every page shows it)."""

    def __init__(self, labels: LabelsFile):
        self.labels = labels
        self._key: tuple | None = None
        self._found: LabelEstimate | None = None
        self._lock = threading.Lock()

    def current(self) -> LabelEstimate:
        with self._lock:
            key = self.labels.version
            if key != self._key:
                self._found, self._key = labels_estimate(self.labels), key
            return self._found


STYLE = """
body{font:16px/1.5 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
header{background:#1d2330;color:#fff;padding:.6em 1.2em;display:flex;justify-content:space-between;flex-wrap:wrap}
header b{font-weight:600}main{max-width:60em;margin:1em auto;padding:0 1em}
.question{font-size:1.25em;font-weight:600;background:#fff;border-left:5px solid #3b6fd8;padding:.7em 1em;margin:0}
.source{color:#555;font-size:.9em;margin:.2em 0 1em 1.3em}.progress{color:#1d2330;font-size:.9em;margin:.3em 0 1em}
.doc{background:#fff;padding:1em;border:1px solid #d8dce3;max-height:55vh;overflow:auto;position:relative}
.doc h2{font-size:1em;margin:0 0 .5em;color:#555}.context{color:#6b7280;white-space:pre-wrap}
.passage{white-space:pre-wrap;background:#fff7c2;border:2px solid #e8c400;border-left-width:6px;padding:.5em .8em;
margin:.4em 0}
mark{background:#fff1a8;color:#1d2330;padding:0 .2em}
form{margin:1em 0;display:flex;gap:.5em;flex-wrap:wrap}
button{font:inherit;padding:.6em .9em;border:1px solid #b7bfcc;background:#fff;cursor:pointer;text-align:left;flex:1 1 12em}
button:hover,button:focus{border-color:#3b6fd8;outline:2px solid #3b6fd8}
button kbd{font-weight:700;background:#1d2330;color:#fff;padding:0 .4em;margin-right:.4em;border-radius:3px}
button.skip{flex:0 0 auto;color:#555}.note{background:#fff4e5;border:1px solid #f0b35a;padding:.5em 1em}
.error{background:#fde8e8;border:1px solid #d33;padding:.7em 1em}
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

NOTES = {"taken": "That pair was graded in another tab; here is the next one.",
         "skipped": f"Skipped: that pair comes back after {SKIP_AGAIN_AFTER} more grades.",
         "aside": "Skipped again: that pair is set aside, and its question leaves the random share (the interval goes "
                  "on without it; the report names it)."}


def labels_estimate(labels: LabelsFile, recommend_config=None) -> LabelEstimate:
    """What the labels so far say (``estimate_labels`` on the pool, with the pairs set aside by skips)."""
    pool = labels.pool
    found = estimate_labels(pool.arrays(), pool.plan, labels.grades(), binary_human=pool.scale == "binary",
                            recommend_config=recommend_config, set_aside=labels.set_aside,
                            question_ids=pool.question_ids)
    if labels.regraded:
        found.notes.append(f"{labels.regraded} pair{'s' if labels.regraded > 1 else ''} graded twice with different "
                           f"grades in {labels.path.name} (the last grade kept): two pages served it at once before "
                           "the labels file took a lock")
    return found


def estimate_lines(labels: LabelsFile) -> list[str]:
    return labels_estimate(labels).lines()


def pairs_until(labels: LabelsFile, questions: int) -> tuple[int, int]:
    """(questions, pairs) the labeller still has to grade, in the page's order, before the random share's labelled
    questions number ``questions`` (those still in it): the open ones of the first ``questions`` of the
    permutation, and the pairs served up to the last pair of theirs."""
    pool = labels.pool
    left_out = {pool.pairs[p].query_id for p in labels.set_aside}
    kept = [pool.question_ids[q] for q in pool.plan.permutation if pool.question_ids[q] not in left_out]
    wanted = set(kept[:questions])
    remaining = labels.remaining()
    todo = [i for i, p in enumerate(remaining) if pool.pairs[p].query_id in wanted]
    return len({pool.pairs[remaining[i]].query_id for i in todo}), (todo[-1] + 1 if todo else 0)


def progress_line(labels: LabelsFile, found: LabelEstimate) -> str:
    """How far the labels are from the first interval, then from the decision, in questions and pairs."""
    labelled = found.labelled_questions
    if labelled < found.min_questions:
        questions, pairs = pairs_until(labels, found.min_questions)
        return (f"First interval: {questions} more questions to label whole ({labelled} of {found.min_questions} "
                f"done): the next {pairs} pairs.")
    if found.recommendation is None:
        return f"{labelled} of {found.n_questions} questions labelled whole."
    needed = found.questions_to_decide
    if needed == 0:
        return f"Decided on {labelled} labelled questions: {found.recommendation.config} (see the estimate)."
    if needed is None:
        return (f"Decision: no number of labelled questions decides at a zero margin ({labelled} labelled); "
                "give a margin (--margin).")
    if needed > found.n_questions - len(found.left_out):
        return (f"Decision: about {needed} labelled questions would decide, more than the {found.n_questions} "
                f"questions here ({labelled} labelled): the labels narrow the intervals but cannot decide alone.")
    questions, pairs = pairs_until(labels, needed)
    return (f"Decision: about {needed} labelled questions would decide ({labelled} now): {questions} more questions, "
            f"about the next {pairs} pairs.")


def render_pair(labels: LabelsFile, pair: int, tab: str, secret: str, note: str = "",
                found: LabelEstimate | None = None) -> str:
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
    if labels.skipped(pair):
        note = note or ("You skipped this pair before: grade it if you can. Skipped again, it is set aside and its "
                        "question leaves the random share (the interval goes on without it).")
    note_html = f'<p class="note" role="status">{html.escape(note)}</p>' if note else ""
    source = pool.sources.get(p.query_id, "")
    source_html = f'<p class="source" id="source">{html.escape(source)}</p>' if source else '<div class="source"></div>'
    progress = f'<p class="progress" id="progress">{html.escape(progress_line(labels, found))}</p>' if found else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>kbench label: {left} left</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{STYLE}</style></head>
<body><header><span><b>kbench label</b> · {html.escape(pool.dataset)} · {html.escape(labels.annotator)}</span>
<span id="left"><b>{left}</b> left of {len(pool.pairs)} · {labels.count} graded</span></header>
<main>{note_html}{progress}
<p class="question" id="question">{html.escape(pool.questions[p.query_id])}</p>{source_html}
<p>How well does the <mark>marked passage</mark> below answer this question? Judge the marked passage only; the grey
text around it is its document, for context.</p>
<form method="post" action="/grade" id="grades">
<input type="hidden" name="tab" value="{tab}"><input type="hidden" name="secret" value="{secret}">
<input type="hidden" name="pair" value="{pair}">
{buttons}<button type="submit" class="skip" name="grade" value="skip" data-key="s"><kbd>s</kbd>skip</button>
</form>
<div class="doc" id="document">{title}<div class="context">{before}</div>
<div class="passage" id="passage">{html.escape(p.text)}</div><div class="context">{after}</div></div>
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


def render_problem(title: str, line: str, link: str = "/") -> str:
    """A page that says one thing went wrong, what to do, and where to go on."""
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>kbench label: {html.escape(title)}
</title><style>{STYLE}</style></head><body><header><span><b>kbench label</b></span></header><main>
<p class="error" role="alert" id="problem">{html.escape(line)}</p><p><a href="{html.escape(link)}">Back to the
page</a></p></main></body></html>"""


class LabelServer(ThreadingHTTPServer):
    """The page's server: the labels file, the leases, the tabs it issued and its form secret."""

    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG

    def __init__(self, address, labels: LabelsFile, leases: Leases, log: Callable[[str], None] | None):
        self.labels, self.leases, self.log = labels, leases, log
        self.tabs = IssuedTabs()
        self.secret = secrets.token_urlsafe(32)
        self.estimates = Estimates(labels)
        super().__init__(address, Handler)

    @property
    def port(self) -> int:
        return self.server_address[1]

    @property
    def hosts(self) -> set[str]:
        """The Host values the page answers to: its own address, by number or as localhost."""
        return {f"127.0.0.1:{self.port}", f"localhost:{self.port}"}

    def say(self, line: str) -> None:
        if self.log is not None:
            self.log(line)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30
    server: LabelServer

    def log_message(self, *args):
        pass

    def handle(self) -> None:
        try:
            super().handle()
        except (ConnectionError, TimeoutError):  # a browser that hung up mid-request: nothing to answer
            self.close_connection = True

    def _send(self, status: int, body: str, content_type: str = "text/html; charset=utf-8",
              headers: dict | None = None) -> None:
        payload = body.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", "DENY")  # no other page frames this one (and its keys)
        self.send_header("Content-Security-Policy", "frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
        self.send_header("Referrer-Policy", "same-origin")
        if self.close_connection:
            self.send_header("Connection", "close")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(payload)

    def _redirect(self, where: str) -> None:
        self._send(303, "", headers={"Location": where})

    def _refuse(self, status: int, title: str, line: str, link: str = "/") -> None:
        self.close_connection = True
        self._send(status, render_problem(title, line, link))

    def _own_host(self) -> bool:
        return self.headers.get("Host", "") in self.server.hosts

    def _own_origin(self) -> str | None:
        """None when the request comes from the page itself; else what it came from, for the refusal."""
        own = {f"http://{host}" for host in self.server.hosts}
        origin = self.headers.get("Origin")
        if origin is not None:
            return None if origin in own else f"Origin {quoted_token(origin)}"
        referer = self.headers.get("Referer")
        if referer is not None:
            parts = urlsplit(referer)
            return None if f"{parts.scheme}://{parts.netloc}" in own else "a Referer of another site"
        return "no Origin or Referer"

    def do_GET(self):  # noqa: N802
        url = urlsplit(self.path)
        if not self._own_host():
            self._refuse(403, "refused", f"this page answers only at http://127.0.0.1:{self.server.port}/")
            return
        if url.path == "/status":
            self._status()
            return
        if url.path != "/":
            self._send(404, "<p>no such page: go to <a href='/'>/</a></p>")
            return
        query = parse_qs(url.query, max_num_fields=10)
        tab = (query.get("tab") or [""])[0]
        if not self.server.tabs.known(tab):
            if self.headers.get("Sec-Fetch-Dest", "document") != "document":  # an <img>, a <script>, a frame
                self._refuse(403, "refused", "the page opens only as a page of its own")
                return
            self._redirect(f"/?tab={self.server.tabs.issue()}")
            return
        labels, leases = self.server.labels, self.server.leases
        pair = leases.pair_for(tab, labels)
        if pair is None:
            self._send(200, render_done(labels, self.server.estimates.current().lines()))
            return
        note = NOTES.get((query.get("note") or [""])[0], "")
        self._send(200, render_pair(labels, pair, tab, self.server.secret, note, self.server.estimates.current()))

    def _status(self) -> None:
        site = self.headers.get("Sec-Fetch-Site")
        if site not in (None, "same-origin", "none") or (self.headers.get("Origin") is not None
                                                         and self._own_origin() is not None):
            self.close_connection = True
            self._send(403, json.dumps({"error": "the status answers the page's own origin only"}),
                       "application/json")
            return
        self._send(200, json.dumps(status(self.server.labels, self.server.estimates.current())), "application/json")

    def do_POST(self):  # noqa: N802
        if urlsplit(self.path).path != "/grade":
            self.close_connection = True
            self._send(404, "<p>no such form</p>")
            return
        length = self.headers.get("Content-Length", "0").strip()
        if not (length.isascii() and length.isdigit()) or int(length) > MAX_FORM_BYTES:
            self._refuse(400, "bad request", "a grade is a small form (a Content-Length of digits, at most "
                                             f"{MAX_FORM_BYTES} bytes): send it from the page")
            return
        try:
            body = self.rfile.read(int(length)).decode("utf-8")
            form = parse_qs(body, max_num_fields=10, errors="strict")
        except (UnicodeDecodeError, ValueError):
            self._refuse(400, "bad request", "that form is not a form the page sends: send it from the page")
            return
        tab, secret, pair, grade = (form.get(k, [""])[0] for k in ("tab", "secret", "pair", "grade"))
        if not self._own_host():
            self._refuse(403, "refused", f"this page answers only at http://127.0.0.1:{self.server.port}/")
            return
        if (came := self._own_origin()) is not None:
            self.server.say(f"kbench label: refused a grade sent by another site ({came}): nothing written")
            self._refuse(403, "refused", f"Refused: this grade came from another site ({came}), not from the "
                                         "labelling page; nothing was saved.")
            return
        if not self.server.tabs.known(tab) or not hmac.compare_digest(secret.encode(), self.server.secret.encode()):
            self._refuse(403, "refused", "Refused: this form was not issued by this page (a page of an earlier "
                                         "server, or another site's): nothing was saved; open the page again.")
            return
        labels, leases = self.server.labels, self.server.leases
        if not (pair.isascii() and pair.isdigit()) or int(pair) >= len(labels.pool.pairs):
            self._refuse(400, "bad request", "that form did not come from this page: open the page again",
                         f"/?tab={tab}")
            return
        pair_index = int(pair)
        if grade == "skip":
            if self._written(lambda: labels.skip(pair_index), pair_index, "skip", tab):
                leases.release(tab, pair_index)
                self._redirect(f"/?tab={tab}&note=" + ("aside" if labels.skipped(pair_index) >= 2 else "skipped"))
            return
        if not (grade.isascii() and grade.isdigit()) or int(grade) not in labels.pool.grades:
            self._refuse(400, "bad request", f"grade {quoted_token(grade[:10])} is not on the scale "
                                             f"({', '.join(map(str, labels.pool.grades))})", f"/?tab={tab}")
            return
        if leases.held_by_other(tab, pair_index):
            self._redirect(f"/?tab={tab}&note=taken")
            return
        written: list[bool] = []
        if not self._written(lambda: written.append(labels.add(pair_index, int(grade))), pair_index, grade, tab):
            return
        leases.release(tab, pair_index)
        if written[0]:
            self.server.say(f"kbench label: {labels.count} graded ({labels.pool.pairs[pair_index].pair_id}: {grade})")
        self._redirect(f"/?tab={tab}" + ("" if written[0] else "&note=taken"))

    def _written(self, write: Callable[[], object], pair: int, grade: str, tab: str) -> bool:
        """Run ``write``; when the labels file cannot be written, answer the error page, say one line on the
        terminal, and return False (the pair stays ungraded)."""
        try:
            write()
            return True
        except OSError as e:
            where = e.filename or str(self.server.labels.path)
            fix = WRITE_FIXES.get(e.errno, "check the disk and the file, then press the grade again")
            what = "the skip" if grade == "skip" else f"grade {grade}"
            passage = encode_id(self.server.labels.pool.pairs[pair].pair_id)
            self.server.say(f"kbench label: not saved: {what} of {passage}"
                            f": {e.strerror or e}: {where}; {fix}")
            status = 507 if e.errno in (errno.ENOSPC, errno.EDQUOT) else 500
            self._send(status, render_problem("not saved", f"Not saved: {what} could not be written to {where} "
                                              f"({e.strerror or e}). {fix[0].upper()}{fix[1:]}. This pair stays "
                                              "ungraded; nothing else is lost.", f"/?tab={tab}"))
            return False


def status(labels: LabelsFile, found: LabelEstimate | None = None) -> dict:
    found = found or labels_estimate(labels)
    return {"pairs": len(labels.pool.pairs), "graded": labels.count, "left": len(labels.remaining()),
            "labels": str(labels.path), "labelled_questions": found.labelled_questions,
            "questions_to_decide": found.questions_to_decide, "left_out": found.left_out,
            "estimate": found.lines()}


@dataclass
class RunningPage:
    server: LabelServer
    lock: LabelsLock
    thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/"

    def close(self) -> None:
        if self.thread is not None:
            self.server.shutdown()
        self.server.server_close()
        self.lock.release()


def start_page(labels: LabelsFile, port: int = 0, *, background: bool = True, lease_s: float = LEASE_S,
               log: Callable[[str], None] | None = None) -> RunningPage:
    """Take the labels file's lock (a LabelError naming the process that holds it), bind 127.0.0.1:``port`` (0:
    any free port; OSError when the port is taken) and serve the page."""
    lock = LabelsLock(labels.path, "serving the labelling page").acquire()
    try:
        server = LabelServer(("127.0.0.1", port), labels, Leases(lease_s), log)
    except BaseException:
        lock.release()
        raise
    running = RunningPage(server, lock)
    lock.update(running.url)
    if lock.note and log is not None:
        log(lock.note)
    if background:
        running.thread = threading.Thread(target=server.serve_forever, daemon=True)
        running.thread.start()
    return running


__all__ = ["LEASE_S", "Leases", "LabelServer", "RunningPage", "estimate_lines", "labels_estimate", "render_pair",
           "start_page", "status"]
