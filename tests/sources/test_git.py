"""The git source and the commits method on a repository this test creates with git (never the network)."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from kbench.datasets.spans import load_kbench_spans
from kbench.datasets.synthetic import SyntheticError, build_from_source
from kbench.sources.git import GitSourceError, load_git

COMMITS = [  # (date, subject, body, {path: content})
    ("2024-01-05T10:00:00", "Add the retry policy module", "Retries use exponential backoff.",
     {"src/retry.py": "def backoff(attempt):\n    return min(2 ** attempt, 60)\n"}),
    ("2024-02-10T10:00:00", "Document the installation steps", "",
     {"docs/install.md": "# Install\n\nRun pip install lumen.\n"}),
    ("2024-03-15T10:00:00", "Cap the backoff at thirty seconds", "Sixty was too long for interactive jobs.",
     {"src/retry.py": "def backoff(attempt):\n    return min(2 ** attempt, 30)\n"}),
    ("2024-04-20T10:00:00", "wip", "", {"src/scratch.py": "x = 1\n"}),
    ("2024-05-25T10:00:00", "Explain webhook signature checks in the guide", "Covers the HMAC header.",
     {"docs/webhooks.md": "# Webhooks\n\nVerify the X-Lumen-Signature header with HMAC-SHA256.\n"}),
]


def git(repo: Path, *args: str, date: str | None = None) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(repo), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.org",
           "GIT_COMMITTER_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@example.org"}
    if date:
        env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("repo")
    git(root, "init", "-q", "-b", "main")
    for date, subject, body, files in COMMITS:
        for name, content in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(content)
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", subject + (f"\n\n{body}" if body else ""), date=date)
    return root


def test_commits_become_commit_documents(repo):
    documents = load_git(repo)
    assert [d.title for d in documents] == [c[1] for c in reversed(COMMITS)]  # newest first
    latest = documents[0]
    assert latest.doc_type == "commit" and latest.doc_id.endswith(".commit") and len(latest.doc_id) == 19
    assert latest.text.startswith("Explain webhook signature checks in the guide\n\nCovers the HMAC header.\n")
    assert "Changed paths:\nA\tdocs/webhooks.md" in latest.text and "diff --git a/docs/webhooks.md" in latest.text
    assert "+Verify the X-Lumen-Signature header" in latest.text
    assert latest.metadata["paths"] == ["docs/webhooks.md"] and latest.metadata["author"] == "Ada"


def test_since_max_commits_and_path_globs(repo):
    assert [d.title for d in load_git(repo, since="2024-03-01")] == [c[1] for c in reversed(COMMITS[2:])]
    assert len(load_git(repo, max_commits=2)) == 2
    only_src = load_git(repo, include=["src/**"])
    assert {p for d in only_src for p in d.metadata["paths"]} == {"src/retry.py", "src/scratch.py"}
    assert all("docs/" not in d.text for d in only_src)
    bounded = load_git(repo, max_diff_lines=3)
    assert all(len(d.text.split("diff --git", 1)[1].splitlines()) <= 4 for d in bounded)
    assert any("more diff lines not shown" in d.text for d in bounded)


def test_a_folder_that_is_not_a_repository_is_refused(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(GitSourceError, match="not a git repository"):
        load_git(plain)
    with pytest.raises(SyntheticError, match="not a git repository"):
        build_from_source(str(plain), tmp_path / "out", method="commits")
    assert not (tmp_path / "out").exists()


def test_the_commits_method_builds_a_set(repo, tmp_path):
    out = tmp_path / "history"
    report = build_from_source(str(repo), out, method="commits", seed=0)
    rows = [json.loads(line) for line in (out / "questions.jsonl").read_text().splitlines()]
    assert report.kept == len(rows) == 4 and report.rejected["subject_too_short"] == 1  # "wip"
    dataset = load_kbench_spans(out)  # every offset checked against the indexed copy
    types = {d.doc_type for d in dataset.documents}
    assert types == {"commit"} and len(dataset.documents) == 5  # "wip" stays as a distractor
    for row in rows:
        ref = row["references"][0]
        copy = (out / "docs" / ref["doc_id"]).read_text()
        assert copy[ref["start_index"]:ref["end_index"]] == ref["content"] and ref["content"].startswith("diff --git")
        assert row["question"] not in copy.splitlines()  # the subject left the indexed copy
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["source"]["kind"] == "git" and len(manifest["source_hashes"]) == 5


@pytest.mark.slow
def test_the_historical_preset_searches_the_commits(repo, tmp_path, config_for):
    from kbench.config import load_experiment
    from kbench.runner import run_experiment

    build_from_source(str(repo), tmp_path / "history", method="commits")
    config = load_experiment(config_for(dataset={"path": str(tmp_path / "history")},
                                        chunking={"strategy": "fixed", "chunk_size": 4000, "chunk_overlap": 0},
                                        retrieval={"preset": "historical", "latency": "batch"},
                                        evaluation={"k": [1, 5]}))
    result = run_experiment(config, progress=False, log=False)
    assert result.counts["queries"] == 4
    assert result.metrics["doc_recall_at_5"] == 1.0  # 5 commits, top 10: every diff is found
    assert result.metrics["doc_mrr_at_5"] > 0.5
