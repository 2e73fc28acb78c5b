"""Issue 51 on two real demo runs' pool: only the page writes (tab tokens it issued, its form secret, its own
origin), a grade that cannot be written is told to the labeller, malformed requests get a 400 and no traceback,
racing tabs write a pair once, one server per labels file, labels with hostile document paths read back after a
``kill -9``, a skip never holds back the interval, a restart says what happened to the files, and a bad Label
Studio export is one line."""
from __future__ import annotations

import copy
import dataclasses
import html
import errno
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

import kbench.labelling.labels as labels_module
from kbench.cli import main as kbench_main
from kbench.labelling.labels import (SKIP_AGAIN_AFTER, LabelsFile, lock_path, pool_path, provenance_path,
                                     read_qrels)
from kbench.labelling.order import MIN_QUESTIONS, labelled_prefixes
from kbench.labelling.page import labels_estimate, progress_line, start_page
from kbench.labelling.pool import LabelError
from tests.labelling.client import get, open_tab, post

pytestmark = pytest.mark.port

KBENCH = [sys.executable, "-c", "import sys; from kbench.cli import console_main; sys.exit(console_main())"]


@pytest.fixture
def page(demo_pool, tmp_path):
    """(running page, its labels file, the lines it printed on the terminal)."""
    labels = LabelsFile.open(tmp_path / "labels.qrels", demo_pool, "tester")
    said: list[str] = []
    running = start_page(labels, 0, log=said.append)
    try:
        yield running, labels, said
    finally:
        running.close()


def _request(running, method: str, path: str, headers: dict, body: bytes | None = None):
    """(status, headers, body) of one request, headers sent as given."""
    connection = http.client.HTTPConnection("127.0.0.1", running.server.port, timeout=30)
    try:
        connection.request(method, path, body=body, headers=headers)
        answer = connection.getresponse()
        return answer.status, dict(answer.getheaders()), answer.read().decode()
    finally:
        connection.close()


def test_a_post_from_another_site_or_with_a_token_never_issued_is_refused_and_writes_nothing(page):
    running, labels, said = page
    tab = open_tab(running.url)
    grade = running.url + "grade"
    refused = {
        "another site's Origin": tab.grade(2, headers={"Origin": "http://attacker.example"}),
        "a null Origin": tab.grade(2, headers={"Origin": "null"}),
        "another port's Origin": tab.grade(2, headers={"Origin": "http://127.0.0.1:1"}),
        "another site's Referer": tab.grade(2, headers={"Referer": "http://attacker.example/page"}),
        "no Origin nor Referer": tab.grade(2, headers={}),
        "tab=attacker": post(grade, tab="attacker", secret=tab.secret, pair=tab.pair, grade=2),
        "64 x A": post(grade, tab="A" * 64, secret=tab.secret, pair=tab.pair, grade=2),
        "no form secret": post(grade, tab=tab.tab, pair=tab.pair, grade=2),
        "a wrong form secret": post(grade, tab=tab.tab, secret="x" * len(tab.secret), pair=tab.pair, grade=2),
    }
    for case, (status, body) in refused.items():
        assert status == 403 and "Refused" in body and "nothing was saved" in body, case
    assert labels.count == 0 and labels.path.read_text() == ""
    assert sum("refused a grade sent by another site" in line for line in said) == 5  # told on the terminal too
    assert tab.grade(2, headers={"Referer": running.url + f"?tab={tab.tab}"})[0] == 303  # the page without Origin
    assert labels.count == 1


def test_the_status_and_the_page_answer_only_the_page_itself(page):
    running, labels, _ = page
    host = f"127.0.0.1:{running.server.port}"
    status, headers, body = _request(running, "GET", "/status", {"Host": host})  # curl, the page's own fetch
    assert status == 200 and json.loads(body)["pairs"] == len(labels.pool.pairs)
    assert not any(h.lower().startswith("access-control") for h in headers)  # no CORS: no other origin reads it
    assert headers["X-Content-Type-Options"] == "nosniff" and headers["Content-Type"] == "application/json"
    for case, sent in {
            "a <script> include on another site": {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Dest": "script"},
            "a page on another port of 127.0.0.1": {"Sec-Fetch-Site": "same-site", "Sec-Fetch-Dest": "script"},
            "a fetch from another origin": {"Origin": "http://attacker.example"}}.items():
        status, headers, body = _request(running, "GET", "/status", {"Host": host, **sent})
        assert status == 403 and "pairs" not in body and not any(h.lower().startswith("access-control")
                                                                 for h in headers), case
    for path in ("/", "/status"):  # a DNS-rebound name: refused
        assert _request(running, "GET", path, {"Host": f"attacker.example:{running.server.port}"})[0] == 403
    status, _, _ = _request(running, "GET", "/?tab=none", {"Host": host, "Sec-Fetch-Dest": "image"})
    assert status == 403  # an <img> of another site gets no token issued
    status, headers, _ = _request(running, "GET", "/", {"Host": host})
    assert status == 303 and headers["X-Frame-Options"] == "DENY"


def _raw(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(data)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    return answer


def test_malformed_requests_get_a_400_and_no_traceback(page, capfd):
    running, labels, _ = page
    port = running.server.port
    head = f"POST /grade HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: http://127.0.0.1:{port}\r\n".encode()
    tab = open_tab(running.url)
    form = f"tab={tab.tab}&secret={tab.secret}&pair={tab.pair}&grade=2"
    cases = {
        "Content-Length: ²": head + "Content-Length: ²\r\n\r\n".encode("utf-8"),
        "Content-Length: -1": head + b"Content-Length: -1\r\n\r\n",
        "Content-Length: abc": head + b"Content-Length: abc\r\nConnection: close\r\n\r\n",
        "a body of 1 MB": head + b"Content-Length: 1048576\r\n\r\n",
        "a body not UTF-8": head + b"Content-Length: 4\r\n\r\n\xff\xfe\xfd\xfc",
        "a form of 40 fields": head + b"Content-Length: 159\r\n\r\n" + b"&".join([b"a=1"] * 40),
        "a grade of text": head + f"Content-Length: {len(form) + 3}\r\n\r\n{form}abc".encode(),
    }
    for case, data in cases.items():
        answer = _raw(port, data)
        assert answer.startswith(b"HTTP/1.") and answer.split(b" ", 2)[1] == b"400", (case, answer[:200])
    assert labels.count == 0
    assert tab.grade(2)[0] == 303 and labels.count == 1  # the page lives on
    assert "Traceback" not in capfd.readouterr().err


@contextmanager
def tiny_disk(folder: Path, size: str = "8m"):
    """A tmpfs of ``size`` mounted at ``folder`` (None when this process may not mount one)."""
    folder.mkdir()
    mounted = os.geteuid() == 0 and subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                                                    str(folder)], capture_output=True).returncode == 0
    try:
        yield folder if mounted else None
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def _fill(folder: Path) -> Path:
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError as e:
        assert e.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return filler


def _not_saved(running, labels, said, capfd, status: int, fix: str) -> None:
    """A grade posted now is answered by an error page naming the file and the fix, one terminal line, no
    traceback; the pair stays ungraded and is shown again."""
    tab = open_tab(running.url)
    before, lines, pair = labels.count, len(said), tab.pair
    answer, body = tab.grade(2)
    assert answer == status and "Not saved" in body and str(labels.path) in body and fix in body.lower(), body
    assert labels.count == before and len(said) == lines + 1 and said[-1].startswith("kbench label: not saved")
    assert fix in said[-1] and "\n" not in said[-1]
    assert tab.reload().pair == pair and np.isnan(labels.grades()[pair])  # still this tab's, still ungraded
    assert "Traceback" not in capfd.readouterr().err


def test_a_grade_that_cannot_be_written_is_told_and_the_pair_stays_ungraded(demo_pool, tmp_path, capfd, monkeypatch):
    with tiny_disk(tmp_path / "disk") as disk:
        folder = disk or tmp_path / "disk"
        labels = LabelsFile.open(folder / "labels.qrels", demo_pool, "tester")
        said: list[str] = []
        running = start_page(labels, 0, log=said.append)
        try:
            if disk is not None:  # a real full disk: a tmpfs filled to the last byte
                filler = _fill(disk)
                _not_saved(running, labels, said, capfd, 507, "the disk is full")
                filler.unlink()
                assert open_tab(running.url).grade(1)[0] == 303 and labels.count == 1  # freed: saved
                assert subprocess.run(["mount", "-o", "remount,ro", str(disk)]).returncode == 0
                _not_saved(running, labels, said, capfd, 500, "the file system is read-only")
                subprocess.run(["mount", "-o", "remount,rw", str(disk)], check=True)
            else:  # no mount here: the same errors from os.write, in this process (a stand-in, said so)
                real_write = os.write

                def failing(code):
                    def write(fd, data):
                        if os.readlink(f"/proc/self/fd/{fd}").endswith(".qrels"):
                            raise OSError(code, os.strerror(code))
                        return real_write(fd, data)
                    return write
                monkeypatch.setattr(labels_module.os, "write", failing(errno.ENOSPC))
                _not_saved(running, labels, said, capfd, 507, "the disk is full")
                monkeypatch.setattr(labels_module.os, "write", failing(errno.EROFS))
                _not_saved(running, labels, said, capfd, 500, "the file system is read-only")
                monkeypatch.setattr(labels_module.os, "write", real_write)
            lines = labels.path.read_text().splitlines()
            assert len(lines) == labels.count and all(len(line.split()) == 4 for line in lines)  # no partial line
            labels.path.unlink()  # the file gone while the page runs: not made again behind the labeller's back
            _not_saved(running, labels, said, capfd, 500, "the file is gone")
            assert not labels.path.exists()
        finally:
            running.close()


def test_racing_tabs_never_write_a_pair_twice(demo_pool, tmp_path):
    labels = LabelsFile.open(tmp_path / "labels.qrels", demo_pool, "tester")
    running = start_page(labels, 0, lease_s=0.0)  # leases lapse at once: every tab may post any pair
    try:
        tabs = [open_tab(running.url) for _ in range(20)]
        for round_ in range(10):
            pair = labels.remaining()[0]
            racers = tabs if round_ % 2 else [tabs[0]] * 20  # 20 tabs, or one tab duplicated 20 times
            start = threading.Barrier(20)

            def race(i: int):
                start.wait()
                return racers[i].grade(i % 4, pair=pair)

            with ThreadPoolExecutor(20) as pool:
                answers = list(pool.map(race, range(20)))
            assert [status for status, _ in answers] == [303] * 20  # the backlog held 20 at once: no reset
            assert sum(not where.endswith("note=taken") for _, where in answers) == 1
        lines = labels.path.read_text().splitlines()
        assert len(lines) == 10 == len({line.split()[2] for line in lines}) == labels.count
    finally:
        running.close()


def test_a_second_server_on_one_labels_file_is_refused_and_a_dead_ones_lock_taken_over(demo_pool, tmp_path):
    path = tmp_path / "labels.qrels"
    first = start_page(LabelsFile.open(path, demo_pool, "alice"), 0)
    try:
        with pytest.raises(LabelError) as refused:
            start_page(LabelsFile.open(path, demo_pool, "bob"), 0)
        line = str(refused.value)
        assert f"process {os.getpid()}" in line and first.url in line and "\n" not in line
    finally:
        first.close()
    dead = subprocess.Popen(["true"])
    dead.wait()
    lock_path(path).write_text(json.dumps({"pid": dead.pid, "doing": "serving the labelling page"}))
    said: list[str] = []
    start_page(LabelsFile.open(path, demo_pool, "carol"), 0, log=said.append).close()
    assert said == [f"kbench label: took over the lock of {path} from process {dead.pid} (serving the labelling "
                    "page), which is no longer running"]


HOSTILE = ["with space.md", "<img src=x onerror=alert(1)>.md", "\"quoted\" & 'single'.md", "tab\there.md",
           "naïve/日本語 ページ.md", "new\nline.md", "100% sure.md", "percent%20already.md"]


def hostile_pool(pool):
    """The pool with every document renamed to a path no one should have to think about, and three questions
    with ids to match."""
    docs = {}
    for p in pool.pairs:
        docs.setdefault(p.doc_id, f"docs/{len(docs)}-{HOSTILE[len(docs) % len(HOSTILE)]}")
    questions = {q: (f"{q} <b>«{i}»</b>\t\"x\"" if i < 3 else q) for i, q in enumerate(pool.questions)}
    out = copy.deepcopy(pool)
    out.pairs = [dataclasses.replace(p, doc_id=docs[p.doc_id], query_id=questions[p.query_id]) for p in pool.pairs]
    out.questions = {questions[q]: text for q, text in pool.questions.items()}
    out.sources = {}
    return out


def _serve(pool_file: Path, err: Path):
    with open(err, "w") as stderr:
        server = subprocess.Popen([*KBENCH, "label", "--pool", str(pool_file), "--annotator", "tester"],
                                  stdout=subprocess.PIPE, stderr=stderr, text=True)
    return server, re.search(r"(http://127\.0\.0\.1:\d+/)", server.stdout.readline()).group(1)


def test_labels_of_hostile_document_paths_read_back_after_kill_9(demo_pool, tmp_path):
    pool = hostile_pool(demo_pool)
    path = tmp_path / "labels.qrels"
    pool.write(pool_path(path))
    server, url = _serve(pool_path(path), tmp_path / "first.err")
    graded = {}
    try:
        tab = open_tab(url)
        for i in range(12):
            assert "<img src=x" not in tab.page and "<b>«" not in tab.page  # escaped, never raw
            assert html.escape(pool.pairs[tab.pair].doc_id) in tab.page  # the path shown, escaped
            graded[tab.pair] = i % 4
            assert tab.grade(i % 4)[0] == 303
            tab.reload()
    finally:
        server.send_signal(signal.SIGKILL)
        server.wait()
    killed = server.pid
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 12 and all(len(line.split()) == 4 for line in lines)  # TREC qrels: four words a line
    assert read_qrels(path, pool) == graded
    server, url = _serve(pool_path(path), tmp_path / "restart.err")  # the restart reads back the file it wrote
    try:
        status = json.loads(get(url + "status")[1])
        assert status["graded"] == 12 and status["left"] == len(pool.pairs) - 12
        assert open_tab(url).pair not in graded
    finally:
        server.terminate()
        server.communicate(timeout=60)
    said = (tmp_path / "restart.err").read_text()
    assert f"took over the lock of {path} from process {killed} (serving the labelling page" in said
    assert "Traceback" not in said


def test_one_skip_does_not_hold_back_the_interval(demo_pool, tmp_path):
    labels = LabelsFile.open(tmp_path / "labels.qrels", demo_pool, "tester")
    skipped = labels.remaining()[0]  # the first pair of the first random-share question
    labels.skip(skipped)
    served_again_after = None
    for _ in range(2 * len(demo_pool.pairs)):
        pair = labels.remaining()[0]
        if pair == skipped:  # served again soon; skipped again, it is set aside
            served_again_after = labels.count
            labels.skip(pair)
            continue
        grade = demo_pool.model_grades[pair]
        labels.add(pair, int(3 * (0 if np.isnan(grade) else grade)))
        questions, _ = labelled_prefixes(demo_pool.plan, demo_pool.question_of, ~np.isnan(labels.grades()),
                                         labels.set_aside)
        if questions.sum() >= MIN_QUESTIONS:
            break
    assert served_again_after == SKIP_AGAIN_AFTER
    first = [demo_pool.plan.permutation[i] for i in range(MIN_QUESTIONS + 1)]
    assert labels.count <= int(np.isin(demo_pool.question_of, first).sum()) + demo_pool.plan.block
    graded = ~np.isnan(labels.grades())
    assert labelled_prefixes(demo_pool.plan, demo_pool.question_of, graded)[0].sum() == 0  # the old rule: nothing
    found = labels_estimate(labels)
    assert found.labelled_questions >= MIN_QUESTIONS and np.isnan(labels.grades()[skipped])
    assert found.left_out == [demo_pool.pairs[skipped].query_id]
    text = "\n".join(found.lines())
    assert "1 question left the random share" in text and "no interval yet" not in text
    resumed = LabelsFile.open(labels.path, demo_pool, "tester")  # the skips are read back from the provenance
    of_its_question = int((demo_pool.question_of == demo_pool.question_of[skipped]).sum())
    assert resumed.set_aside == {skipped} and skipped in resumed.remaining()[-of_its_question:]


def test_a_restart_says_what_happened_to_the_files(demo_pool, tmp_path):
    path = tmp_path / "labels.qrels"
    labels = LabelsFile.open(path, demo_pool, "alice")
    for pair in labels.remaining()[:2]:
        labels.add(pair, 2)
    side = provenance_path(path)
    kept = side.read_bytes()
    path.unlink()  # the labels file deleted
    with pytest.raises(LabelError, match=r"labels.qrels is gone, but its provenance \(labels.qrels.provenance.jsonl\) "
                                         r"records 2 grades"):
        LabelsFile.open(path, demo_pool, "alice")
    path.write_text("")
    side.unlink()  # the provenance deleted
    path.write_text("q 0 d@0-1 2\n")
    with pytest.raises(LabelError, match="holds 1 grade line but no provenance beside it"):
        LabelsFile.open(path, demo_pool, "alice")
    side.write_bytes(kept.split(b"\n", 1)[1])  # the header line lost
    with pytest.raises(LabelError, match="has no header") as e:
        LabelsFile.open(path, demo_pool, "alice")
    assert "fingerprint None" not in str(e.value)


def test_a_key_in_a_labels_line_is_never_echoed(demo_pool, tmp_path):
    path = tmp_path / "labels.qrels"
    LabelsFile.open(path, demo_pool, "alice")
    for line in ("OPENAI_API_KEY=sk-live-S3CRETkeyS3CRETkey 0 sk-live-S3CRETkeyS3CRETkey 1",
                 "export OPENAI_API_KEY=sk-live-S3CRETkeyS3CRETkey0123456789"):
        path.write_text(line + "\n")
        with pytest.raises(LabelError) as e:
            LabelsFile.open(path, demo_pool, "alice")
        message = str(e.value)
        assert "S3CRET" not in message and "sk-live" not in message and "OPENAI_API_KEY" not in message, message


def _ls_cases(pair):
    data = {"query_id": pair.query_id, "kbench_pair": pair.pair_id}

    def annotated(result):
        return [{"id": 1, "data": data, "annotations": [{"result": result}]}]

    grade = {"from_name": "grade", "to_name": "passage", "type": "choices"}
    return {
        "a list of numbers": ([1, 2, 3], "task 0: a JSON number, not a task object"),
        "an object": ({"tasks": []}, "the file: a JSON object, where a Label Studio JSON export is a list"),
        "data a string": ([{"id": 1, "data": "q1", "annotations": []}], "\"data\" is a JSON string"),
        "annotations an object": ([{"id": 1, "data": data, "annotations": {"a": 1}}],
                                  "\"annotations\" is a JSON object"),
        "result a string": (annotated("3"), "\"result\" is a JSON string"),
        "a result a number": (annotated([7]), "result 0: a JSON number"),
        "value a list": (annotated([{**grade, "value": [3]}]), "\"value\" is a JSON array"),
        "a choice ²": (annotated([{**grade, "value": {"choices": ["²"]}}]), "the grade '²' is not a whole number"),
        "a choice true": (annotated([{**grade, "value": {"choices": [True]}}]), "the grade a JSON boolean"),
        "a key as the pair": ([{"id": 1, "data": {**data, "kbench_pair": "OPENAI_API_KEY=sk-live-S3CRETkey"},
                                "annotations": []}], "is not a pair of this pool"),
    }


def test_every_malformed_label_studio_export_is_one_line_and_exit_2(demo_pool, tmp_path, capsys):
    path = tmp_path / "labels.qrels"
    LabelsFile.open(path, demo_pool, "alice")
    for case, (export, expected) in _ls_cases(demo_pool.pairs[0]).items():
        file = tmp_path / "export.json"
        file.write_text(json.dumps(export))
        try:
            code = kbench_main(["label", "--pool", str(pool_path(path)), "--import-label-studio", str(file)])
        except SystemExit as e:
            code = e.code
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and expected in err and "Traceback" not in err, (case, err)
        assert "S3CRET" not in err and path.read_text() == "", case  # nothing written


def test_a_labels_file_from_before_ids_were_encoded_reads_back_and_is_rewritten(demo_pool, tmp_path):
    """What the page wrote before issue 51: ids as they were, a space in a path making a line of six words (which
    kbench then refused: `'q9' and 5 more words (not shown) is not a qrels line`)."""
    pool = hostile_pool(demo_pool)
    path = tmp_path / "labels.qrels"
    LabelsFile.open(path, pool, "alice")
    side = provenance_path(path)
    header, *events = side.read_text(encoding="utf-8").splitlines()
    side.write_text(json.dumps({k: v for k, v in json.loads(header).items() if k != "ids"}) + "\n", encoding="utf-8")
    kept = [i for i, p in enumerate(pool.pairs) if "\n" not in p.pair_id + p.query_id][:10]  # a newline: no line
    assert any(" " in pool.pairs[i].pair_id for i in kept)
    path.write_text("".join(f"{pool.pairs[i].query_id} 0 {pool.pairs[i].pair_id} {i % 4}\n" for i in kept),
                    encoding="utf-8")
    labels = LabelsFile.open(path, pool, "alice")
    assert {i: int(g) for i, g in enumerate(labels.grades()) if not np.isnan(g)} == {i: i % 4 for i in kept}
    assert json.loads(side.read_text().splitlines()[0])["ids"] == "percent-encoded"
    assert all(len(line.split()) == 4 for line in path.read_text(encoding="utf-8").splitlines())
    assert read_qrels(path, pool) == {i: i % 4 for i in kept}  # rewritten once, encoded


def test_the_pool_reads_the_dataset_where_the_runs_read_it_and_their_logged_costs(demo_pool, demo_runs, tmp_path):
    from kbench.evaluation.config import RecommendConfig
    from kbench.judging.judge import logged_dataset_folder
    from kbench.labelling.labels import read_provenance
    from kbench.tracking.read import tracking_client

    _, uri, ids = demo_runs
    client = tracking_client(uri)
    run = client.get_run(ids[0])
    # a sweep started elsewhere gave a relative dataset.path: the folder the run read is what its dataset.json says
    folder = logged_dataset_folder(client, run, {"dataset": {"path": "sets/docs"}})
    assert folder is not None and Path(folder).is_absolute() and Path(folder).is_dir()
    assert logged_dataset_folder(client, run, {"dataset": {"path": folder}}) is None  # absolute: read as given
    assert demo_pool.dataset_path == folder
    LabelsFile.open(tmp_path / "labels.qrels", demo_pool, "alice")
    assert read_provenance(tmp_path / "labels.qrels")[0]["dataset_path"] == folder  # absolute in the record
    cost = RecommendConfig().cost
    assert all(cost in demo_pool.values[c] for c in demo_pool.configs)  # what the report's cost reads
    labels = LabelsFile.open(tmp_path / "labels.qrels", demo_pool, "alice")
    while labels.remaining() and labels_estimate(labels).labelled_questions < MIN_QUESTIONS + 2:
        for pair in labels.remaining()[:10]:
            grade = demo_pool.model_grades[pair]
            labels.add(pair, int(3 * (0 if np.isnan(grade) else grade)))
    found = labels_estimate(labels)
    assert found.recommendation is not None and cost not in found.recommendation.left_out
    assert "not logged by these runs" not in "\n".join(found.lines())
    assert progress_line(labels, found).startswith(("Decision", "Decided")), progress_line(labels, found)


def test_a_generated_question_shows_where_the_set_made_it(demo_pool, tmp_path):
    from types import SimpleNamespace

    from kbench.labelling.page import render_pair
    from kbench.labelling.pool import question_source

    made = SimpleNamespace(query_id="q1", metadata={"method": "heading", "stratum": "Tutorial - User Guide"})
    dataset = SimpleNamespace(spans={"q1": [SimpleNamespace(doc_id="docs/tutorial/<cli>.md")]}, qrels={})
    where = question_source(made, dataset)
    assert where == "generated (heading), page docs/tutorial/<cli>.md, section Tutorial - User Guide"
    assert question_source(SimpleNamespace(query_id="q2", metadata={}), dataset) == ""  # a person's question
    pool = copy.deepcopy(demo_pool)
    labels = LabelsFile.open(tmp_path / "labels.qrels", pool, "alice")
    pair = labels.remaining()[0]
    pool.sources = {pool.pairs[pair].query_id: where}
    page = render_pair(labels, pair, "tab", "secret")
    assert f'<p class="source" id="source">{html.escape(where)}</p>' in page and "<cli>" not in page


def test_a_pair_two_servers_graded_differently_is_said(demo_pool, tmp_path):
    """What two servers on one labels file wrote before the lock (grades 3 and 0 for one pair): the last is kept,
    and the report says so instead of keeping it without a word."""
    from kbench.labelling.labels import qrels_line

    path = tmp_path / "labels.qrels"
    pair = LabelsFile.open(path, demo_pool, "alice").remaining()[0]
    p = demo_pool.pairs[pair]
    path.write_text(qrels_line(p.query_id, p.pair_id, 3) + qrels_line(p.query_id, p.pair_id, 0), encoding="utf-8")
    labels = LabelsFile.open(path, demo_pool, "alice")
    assert labels.grades()[pair] == 0 and labels.regraded == 1
    assert "1 pair graded twice with different grades in labels.qrels (the last grade kept)" in \
        "\n".join(labels_estimate(labels).lines())
