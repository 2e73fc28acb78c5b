"""Content-addressed caches: round trips, chunk reuse, crash safety (kill -9 mid-write), stats and clear."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from kbench.chunking import chunk_corpus
from kbench.config import ChunkingConfig, DatasetConfig
from kbench.datasets import load_dataset
from kbench.cache import (ChunkCache, EmbeddingCache, cache_stats, clear_cache, document_key, parse_age,
                                shard_files)


@pytest.fixture(scope="module")
def demo_docs():
    return load_dataset(DatasetConfig(name="demo")).documents


def test_embedding_cache_round_trip_across_instances(tmp_path):
    fp = {"model": "m", "dimension": None}
    vectors = np.random.default_rng(0).normal(size=(5, 8)).astype(np.float32)
    keys = [f"{i:064x}" for i in range(5)]
    EmbeddingCache(tmp_path, fp).put_many(keys[:3], vectors[:3])
    EmbeddingCache(tmp_path, fp).put_many(keys[3:], vectors[3:])
    found = EmbeddingCache(tmp_path, fp).get_many(keys + ["f" * 64])
    assert sorted(found) == sorted(keys)
    assert all(np.array_equal(found[k], v) for k, v in zip(keys, vectors))
    assert EmbeddingCache(tmp_path, {**fp, "dimension": 4}).get_many(keys) == {}  # another namespace


def test_chunk_cache_reuses_unchanged_documents_and_rechunks_changed_ones(tmp_path, demo_docs):
    config = ChunkingConfig(strategy="fixed", chunk_size=500, chunk_overlap=50)
    first_stats, again_stats, changed_stats = {}, {}, {}
    fresh = chunk_corpus(demo_docs, config)
    first = chunk_corpus(demo_docs, config, cache_dir=tmp_path, stats=first_stats)
    again = chunk_corpus(demo_docs, config, cache_dir=tmp_path, stats=again_stats)
    assert first_stats == {"chunk_cache_hits": 0, "chunk_cache_misses": len(demo_docs)}
    assert again_stats == {"chunk_cache_hits": len(demo_docs), "chunk_cache_misses": 0}
    as_tuples = lambda cs: [(c.doc_id, c.chunk_number, c.start, c.end, c.text, json.dumps(c.metadata, sort_keys=True))
                            for c in cs]
    assert as_tuples(again) == as_tuples(first) == as_tuples(fresh)

    edited = list(demo_docs)
    edited[0] = replace(edited[0], text=edited[0].text + "\n\nAn added closing paragraph.")
    chunk_corpus(edited, config, cache_dir=tmp_path, stats=changed_stats)
    assert changed_stats == {"chunk_cache_hits": len(demo_docs) - 1, "chunk_cache_misses": 1}

    other_stats = {}
    chunk_corpus(demo_docs, ChunkingConfig(strategy="fixed", chunk_size=400, chunk_overlap=50), cache_dir=tmp_path,
                 stats=other_stats)
    assert other_stats["chunk_cache_misses"] == len(demo_docs)  # other params: another namespace


def test_document_key_covers_what_chunkers_read(demo_docs):
    doc = demo_docs[0]
    assert document_key(doc) == document_key(replace(doc, metadata={"other": 1}))
    assert document_key(doc) != document_key(replace(doc, title=doc.title + "!"))
    assert document_key(doc) != document_key(replace(doc, doc_type="text" if doc.doc_type != "text" else "code"))


WRITER = textwrap.dedent("""
    import sys, numpy as np
    from pathlib import Path
    from kbench.cache import EmbeddingCache, ChunkCache
    root = Path(sys.argv[1])
    emb = EmbeddingCache(root, {"model": "crash-test"})
    chunks = ChunkCache(root, {"chunker": "crash-test"})
    i = 0
    while True:  # big shards so a kill lands inside a write
        keys = [f"{i:08d}{j:056d}" for j in range(20000)]
        emb.put_many(keys, np.full((20000, 384), i, dtype=np.float32))
        chunks.put_many({f"doc{i}-{j}": [{"n": 0, "s": 0, "e": 1, "t": "x" * 200, "m": {"i": i}}] for j in range(3000)})
        print(i, flush=True)
        i += 1
""")


def test_kill_9_mid_write_leaves_every_cache_readable(tmp_path):
    root = tmp_path / "cache"
    for attempt, delay in enumerate((0.3, 0.7, 1.1)):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(root)], stdout=subprocess.PIPE, text=True)
        proc.stdout.readline()  # one shard pair finished
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    emb = EmbeddingCache(root, {"model": "crash-test"})
    index = emb._load()
    shards = shard_files(emb.dir, ".npz")
    assert shards and len(index) == 20000 * len({bytes(k)[:8] for k in index})
    for key, vec in index.items():  # every stored vector is whole and belongs to its key's shard number
        assert vec.shape == (384,) and np.all(vec == float(key[:8]))
    chunk_cache = ChunkCache(root, {"chunker": "crash-test"})
    assert len(chunk_cache._load()) % 3000 == 0 and len(chunk_cache._load()) > 0
    # what a crash leaves is at most temp files: never read, and removed by the next reader (their writer is dead)
    assert not list(root.rglob(".tmp-*"))
    assert clear_cache(root, older_than_seconds=10**9).files == 0


def test_stats_and_clear_older_than(tmp_path, demo_docs):
    root = tmp_path / "cache"
    chunk_corpus(demo_docs[:5], ChunkingConfig(strategy="fixed", chunk_size=500, chunk_overlap=50), cache_dir=root)
    chunk_corpus(demo_docs[5:9], ChunkingConfig(strategy="fixed", chunk_size=500, chunk_overlap=50), cache_dir=root)
    EmbeddingCache(root, {"model": "m"}).put_many(["a" * 64, "b" * 64], np.ones((2, 4), np.float32))
    rows = {r.kind: r for r in cache_stats(root)}
    assert rows["chunks"].entries == 9 and rows["chunks"].shards == 2
    assert rows["embeddings"].entries == 2 and rows["embeddings"].label.startswith("m ")
    # age one chunk shard by ten days: --older-than 7d removes it and nothing else
    old = shard_files(next((root / "chunks").iterdir()), ".json")
    old = [p for p in old if p.name != "key.json"][0]
    old_entries = len(json.loads(old.read_text())["documents"])
    ten_days_ago = time.time() - 10 * 86400
    os.utime(old, (ten_days_ago, ten_days_ago))
    result = clear_cache(root, parse_age("7d"))
    assert result.files == 1 and not old.exists()
    assert {r.kind: r.entries for r in cache_stats(root)} == {"chunks": 9 - old_entries, "embeddings": 2}
    # a cache hit refreshes a shard's age, so used entries survive --older-than
    survivor = [p for p in shard_files(next((root / "chunks").iterdir()), ".json") if p.name != "key.json"][0]
    os.utime(survivor, (ten_days_ago, ten_days_ago))
    stats = {}
    chunk_corpus(demo_docs, ChunkingConfig(strategy="fixed", chunk_size=500, chunk_overlap=50), cache_dir=root,
                 stats=stats)
    assert stats["chunk_cache_hits"] == 9 - old_entries
    assert clear_cache(root, parse_age("7d")).files == 0
    clear_cache(root)
    assert cache_stats(root) == []


@pytest.mark.parametrize("text, seconds", [("90s", 90), ("30m", 1800), ("12h", 43200), ("7d", 604800), ("2w", 1209600)])
def test_parse_age(text, seconds):
    assert parse_age(text) == seconds


@pytest.mark.parametrize("bad", ["7", "d", "7x", "-1d", "abc"])
def test_parse_age_rejects_with_the_fix(bad):
    with pytest.raises(ValueError, match="s/m/h/d/w|negative"):
        parse_age(bad)
