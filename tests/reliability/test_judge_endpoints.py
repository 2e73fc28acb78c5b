"""`kbench judge` against an endpoint that cannot judge, and judged qrels that cannot be used: one line, exit 2,
no qrels file. Before, every endpoint failure became "N answers unparsed", exit 0 and an empty qrels file, and
judged qrels that matched nothing scored every config 0 without a word.

The endpoint is the real `kbench serve` code (kbench.serve.start_server, chat model off) with its fault
injection, in this process; the judge runs as the installed `kbench` command."""
from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest

from kbench.serve import start_server
from tests.reliability.inputs import config, error_lines, make_beir, run_kbench, write_yaml


@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    """One BM25 run on a three-document BEIR set, logged to MLflow: (its folder, workspace, dataset, run id)."""
    root = tmp_path_factory.mktemp("judge")
    dataset = make_beir(root / "beir")
    workspace = root / "ws"
    path = write_yaml(root / "run.yaml", config(workspace, {"path": str(dataset)}))
    done = run_kbench("run", str(path), "--quiet", cwd=root)
    assert done.code == 0, done.err
    run_id = re.search(r"MLflow run (\w+)", done.out).group(1)
    return root, workspace, dataset, run_id


def judge(logged, base_url: str, *extra: str):
    root, workspace, _, run_id = logged
    out = root / "judged.qrels"
    done = run_kbench("judge", run_id, "--out", str(out), "--base-url", base_url, "--model", "m", "--api-key-env",
                      "PATH", "--workspace", str(root / "judge-ws"), "--tracking-uri",
                      f"sqlite:///{workspace / 'mlflow.db'}", "--max-retries", "0", *extra, cwd=root)
    return done, out


def assert_refused(done, out: Path, *fragments: str) -> str:
    assert done.code == 2, done.out + done.err
    assert "Traceback" not in done.err and "Downloading artifacts" not in done.err
    (line,) = error_lines(done.err)
    for fragment in fragments:
        assert fragment in line, line
    assert not out.exists() and not out.with_name(out.name + ".json").exists()
    assert not list(out.parent.glob(".partial-*"))
    return line


@pytest.fixture
def faulty():
    servers = []

    def start(fault: str) -> str:
        running = start_server(port=0, chat=False, preload=(), faults=[fault])
        servers.append(running)
        return running.base_url

    yield start
    for running in servers:
        running.close()


def test_server_down(logged):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done, out = judge(logged, f"http://127.0.0.1:{port}/v1")
    # checked before the runs are pooled (issue 42.7/45): the endpoint, in one line, before any work
    assert_refused(done, out, f"judge: cannot connect to http://127.0.0.1:{port}/v1", "kbench serve", "fix --base-url")


def test_http_500_on_every_request(logged, faulty):
    done, out = judge(logged, faulty("500x-1"))
    assert_refused(done, out, "requests failed and none was answered", "HTTP 500", "check --base-url and --model")


def test_quota_exhausted(logged, faulty):
    done, out = judge(logged, faulty("quotax-1"))
    assert_refused(done, out, "judge: stopped after 0 of", "quota is exhausted", "answers received so far are cached")


def test_a_200_whose_body_is_not_json(logged, faulty):
    done, out = judge(logged, faulty("malformedx-1"))
    assert_refused(done, out, "requests failed and none was answered", "HTTP 200 whose body is not JSON")


def test_answers_slower_than_the_timeout(logged, faulty):
    done, out = judge(logged, faulty("slowx-1;delay_s=3"), "--timeout-s", "0.5")
    assert_refused(done, out, "requests failed and none was answered", "no response within 0.5 s", "--timeout-s")


# --------------------------------------------------------------------------- judged qrels that cannot be used
def compare(logged, qrels: Path, use: str = "beside"):
    root, workspace, _, run_id = logged
    return run_kbench("compare", run_id, run_id, "--judged-qrels", str(qrels), "--judged-use", use,
                      "--tracking-uri", f"sqlite:///{workspace / 'mlflow.db'}", "--out", str(root / "cmp"), cwd=root)


def test_an_empty_judged_qrels_file(logged):
    qrels = logged[0] / "empty.qrels"
    qrels.write_text("")
    done = compare(logged, qrels, "instead")
    assert done.code == 2 and "Traceback" not in done.err
    (line,) = error_lines(done.err)
    assert "holds no judgement; every document would count as not relevant" in line


def test_judged_qrels_that_match_no_question_or_document(logged, tmp_path):
    root, _, dataset, _ = logged
    unknown = root / "unknown.qrels"
    unknown.write_text("q-elsewhere 0 d1 2\nq-other 0 d2 3\n")
    done = compare(logged, unknown, "instead")
    assert done.code == 2
    (line,) = error_lines(done.err)
    assert "2 judgements, but none of its 2 question ids is a question of dataset 'beir'" in line
    other_docs = root / "other-docs.qrels"
    other_docs.write_text("q1 0 elsewhere-1 2\n")
    done = compare(logged, other_docs)
    assert done.code == 2
    assert "none of the documents it grades for this dataset's questions is a document of 'beir'" in done.err

    # kbench run with dataset.judged_qrels_use: instead is refused the same way, before anything is written
    workspace = tmp_path / "ws"
    path = write_yaml(tmp_path / "run.yaml", config(workspace, {"path": str(dataset), "judged_qrels": str(unknown),
                                                                "judged_qrels_use": "instead"}))
    done = run_kbench("run", str(path), "--quiet", cwd=tmp_path)
    assert done.code == 2 and "Traceback" not in done.err
    (line,) = error_lines(done.err)
    assert "dataset.judged_qrels:" in line and "none of its 2 question ids" in line
    assert not (workspace / "runs").exists()


def test_grades_outside_the_judges_scale(logged, tmp_path):
    root, _, dataset, _ = logged
    for grade in ("99", "-5"):
        qrels = root / f"grade{grade}.qrels"
        qrels.write_text(f"q1 0 d1 {grade}\nq2 0 d1 1\n")
        done = compare(logged, qrels)
        assert done.code == 2
        (line,) = error_lines(done.err)
        assert f"1 grade(s) outside the judge's scale 0-3, e.g. {grade} for question 'q1'" in line
        path = write_yaml(tmp_path / "run.yaml", config(tmp_path / "ws", {"path": str(dataset),
                                                                           "judged_qrels": str(qrels)}))
        done = run_kbench("run", str(path), "--quiet", cwd=tmp_path)
        assert done.code == 2 and "outside the judge's scale" in done.err
