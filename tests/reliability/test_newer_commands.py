"""Smaller faults of the commands added lately: what a sub-folder of a repository gives as a commits source, and
whom a message blames when the model's server is down."""
from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

from tests.reliability.inputs import error_lines, run_kbench

GUIDE = ("# Retries\n\nFailed jobs are retried with exponential backoff. The delay doubles after every attempt "
         "and stops growing at thirty seconds, so a flaky worker recovers without a storm of requests.\n")


def commit(repo: Path, files: dict[str, str], subject: str) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(repo), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.org",
           "GIT_COMMITTER_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@example.org"}
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    for args in (["add", "-A"], ["commit", "-q", "-m", subject]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


def test_a_commits_source_that_is_a_sub_folder_of_a_repository_gives_its_own_commits(tmp_path):
    """Every commit was rejected as commit_without_diff: git printed repository paths and read them back from
    the sub-folder. Now the sub-folder's commits come with their diffs, paths relative to it."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True, capture_output=True)
    commit(repo, {"docs/retries.md": GUIDE}, "Explain how failed jobs are retried")
    commit(repo, {"src/retry.py": "def backoff(n):\n    return min(2 ** n, 30)\n"}, "Cap the retry backoff delay")
    commit(repo, {"docs/metrics.md": "# Metrics\n\nWorkers expose Prometheus metrics on port 9464.\n"},
           "Document the metrics port of workers")
    out = tmp_path / "set"
    done = run_kbench("datasets", "build", "synthetic", str(repo / "docs"), "--method", "commits", "--out", str(out),
                      cwd=tmp_path, timeout=120)
    assert done.code == 0, done.err[-2000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["report"]["kept"] == 2 and "commit_without_diff" not in manifest["report"]["rejected"], manifest
    questions = [json.loads(line) for line in (out / "questions.jsonl").read_text().splitlines()]
    assert sorted(q["question"] for q in questions) == ["Document the metrics port of workers",
                                                        "Explain how failed jobs are retried"]
    texts = [p.read_text() for p in (out / "docs").iterdir()]
    assert all("src/retry.py" not in t for t in texts)  # a commit outside the sub-folder is not its history
    assert any("diff --git a/retries.md b/retries.md" in t for t in texts), texts


def test_synthetic_llm_with_the_server_down_blames_the_server_not_the_documents(tmp_path):
    """It said "no document gave a question (... llm_request_failed ...); llm needs documents with text the model
    can quote"."""
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "retries.md").write_text(GUIDE * 3)
    done = run_kbench(
        "datasets", "build", "synthetic", str(docs), "--method", "llm", "--model", "m", "--base-url",
        f"http://127.0.0.1:{port}/v1", "--api-key-env", "KBENCH_TEST_SYNTHETIC_KEY", "--out", str(tmp_path / "set"),
        "--workspace", str(tmp_path / "ws"), cwd=tmp_path, timeout=120, env={"KBENCH_TEST_SYNTHETIC_KEY": "x"})
    assert done.code == 2, done.err[-2000:]
    (line,) = error_lines(done.err)
    assert f"cannot connect to http://127.0.0.1:{port}/v1" in line and "fix --base-url" in line, line
    assert "documents" not in line and "start the endpoint" in line, line  # checked before a document is read
    assert not (tmp_path / "set").exists() and not list(tmp_path.glob(".partial-*"))
