"""Hostile inputs: small damaged datasets built in tmp_path, configs around them, and the real ``kbench`` command.

Every bad input must end with exit code 2 (or ConfigError / DatasetError from the API), one message naming
the file, line or field, and nothing half-written: no run folder, no MLflow database, no cache entry.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from kbench.paths import REPO_ROOT

DEMO = REPO_ROOT / "datasets" / "demo"
KBENCH = Path(sys.executable).with_name("kbench")


@dataclass
class Done:
    code: int
    out: str
    err: str


def run_kbench(*args: str, cwd: Path, timeout: float = 300, env: dict[str, str] | None = None) -> Done:
    """The installed ``kbench`` console script in a subprocess (what a user runs); ``env`` adds variables."""
    env = {**os.environ, **(env or {})}
    env.pop("KBENCH_WORKSPACE", None)  # the config's workspace, never an inherited one
    done = subprocess.run([str(KBENCH), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    return Done(done.returncode, done.stdout, done.stderr)


def error_lines(err: str) -> list[str]:
    """The ``kbench: error:`` lines of stderr (log lines from libraries aside)."""
    return [line for line in err.splitlines() if line.startswith("kbench: error:")]


def assert_nothing_written(workspace: Path) -> None:
    assert not (workspace / "runs").exists(), sorted((workspace / "runs").iterdir())
    assert not (workspace / "mlflow.db").exists()
    assert not (workspace / "mlruns").exists()
    assert not (workspace / "cache").exists()


def config(workspace: Path, dataset: dict, **sections) -> dict:
    """A run that needs no embedding model (the BM25 leg), logging into ``workspace``."""
    base = {"name": "reliability", "workspace": str(workspace), "dataset": dataset,
            "chunking": {"strategy": "fixed", "chunk_size": 400, "chunk_overlap": 50},
            "retrieval": {"legs": ["bm25"], "top_k": 10}, "evaluation": {"k": [1, 5]},
            "tracking": {"experiment": "reliability"}}
    base.update(sections)
    return base


def write_yaml(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def copy_demo(tmp_path: Path) -> Path:
    """A copy of the demo span dataset to damage."""
    target = tmp_path / "demo"
    shutil.copytree(DEMO, target)
    return target


def read_questions(dataset: Path) -> list[dict]:
    return [json.loads(line) for line in (dataset / "questions.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]


def write_questions(dataset: Path, rows: list[dict | str]) -> None:
    lines = [row if isinstance(row, str) else json.dumps(row) for row in rows]
    (dataset / "questions.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


CORPUS = [
    {"_id": "d1", "title": "Queues", "text": "A job queue holds work until a worker takes it."},
    {"_id": "d2", "title": "Retries", "text": "Failed jobs are retried with exponential backoff."},
    {"_id": "d3", "title": "Metrics", "text": "Workers expose Prometheus metrics on port 9464."},
]
QUERIES = [{"_id": "q1", "text": "how are failed jobs retried"}, {"_id": "q2", "text": "which port serves metrics"}]
QRELS = [("q1", "d2", 1), ("q2", "d3", 1)]


def make_beir(root: Path, corpus: list | None = None, queries: list | None = None, qrels: list | None = None,
              corpus_text: str | bytes | None = None, queries_text: str | bytes | None = None,
              qrels_text: str | bytes | None = None) -> Path:
    """A BEIR folder: lists of rows, or raw file contents (str or bytes) to plant a fault."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "qrels").mkdir(exist_ok=True)

    def put(path: Path, raw, default: str) -> None:
        data = default if raw is None else raw
        path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))

    put(root / "corpus.jsonl", corpus_text, "".join(json.dumps(r) + "\n" for r in (corpus or CORPUS)))
    put(root / "queries.jsonl", queries_text, "".join(json.dumps(r) + "\n" for r in (queries or QUERIES)))
    put(root / "qrels" / "test.tsv", qrels_text,
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{s}\n" for q, d, s in (qrels or QRELS)))
    return root
