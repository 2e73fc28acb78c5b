"""`kbench cache stats` and `kbench cache clear [--older-than AGE]` on a workspace with real cached chunks."""
from __future__ import annotations

import os
import time

import pytest

from kbench.chunking import chunk_corpus
from kbench.cli import main
from kbench.config import ChunkingConfig, DatasetConfig
from kbench.datasets import load_dataset


@pytest.fixture
def cached_workspace(tmp_path):
    docs = load_dataset(DatasetConfig(name="demo")).documents
    chunk_corpus(docs, ChunkingConfig(strategy="fixed", chunk_size=700, chunk_overlap=0), cache_dir=tmp_path / "cache")
    return tmp_path, len(docs)


def test_stats_lists_each_namespace(cached_workspace, capsys):
    ws, n_docs = cached_workspace
    assert main(["cache", "stats", "--workspace", str(ws)]) == 0
    out = capsys.readouterr().out
    assert "chunks" in out and "fixed" in out and '"chunk_size": 700' in out
    assert f"{n_docs} entries in 1 files" in out


def test_clear_older_than_keeps_recent_and_clear_removes_all(cached_workspace, capsys):
    ws, _ = cached_workspace
    assert main(["cache", "clear", "--workspace", str(ws), "--older-than", "7d"]) == 0
    assert "removed 0 files" in capsys.readouterr().out
    (shard,) = [p for p in (ws / "cache" / "chunks").rglob("*.json") if p.name != "key.json"]
    old = time.time() - 8 * 86400
    os.utime(shard, (old, old))
    assert main(["cache", "clear", "--workspace", str(ws), "--older-than", "7d"]) == 0
    assert "removed 1 files" in capsys.readouterr().out and not shard.exists()
    chunk_corpus(load_dataset(DatasetConfig(name="demo")).documents[:3],
                 ChunkingConfig(strategy="fixed", chunk_size=700, chunk_overlap=0), cache_dir=ws / "cache")
    assert main(["cache", "clear", "--workspace", str(ws)]) == 0
    assert main(["cache", "stats", "--workspace", str(ws)]) == 0
    assert "empty" in capsys.readouterr().out


def test_a_bad_age_names_the_fix(cached_workspace, capsys):
    ws, _ = cached_workspace
    with pytest.raises(SystemExit):
        main(["cache", "clear", "--workspace", str(ws), "--older-than", "7days"])
    assert "use a number and a unit s/m/h/d/w" in capsys.readouterr().err
