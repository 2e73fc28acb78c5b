"""FAISS indexes: saved beside the database and reopened only when they hold the same rows; recall vs exact."""
from __future__ import annotations

import numpy as np
import pytest

from kbench.config import StoreConfig
from kbench.store.faiss_index import exact_top_k, load_or_build, recall_at_k


@pytest.fixture(scope="module")
def clustered_vectors():
    """Seeded clustered unit vectors: the index mechanics are under test here (uniform random vectors make
    IVF/HNSW look worse than on real embeddings). Recall on real SciFact MiniLM vectors is measured by
    benchmarks/ann_recall.py and by every run with store.index hnsw/ivf."""
    rng = np.random.default_rng(7)
    centers = rng.normal(size=(40, 64)).astype(np.float32)
    points = centers[rng.integers(0, 40, 6000)] + 0.35 * rng.normal(size=(6000, 64)).astype(np.float32)
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    return points[:5000], points[5000:5100]


@pytest.mark.parametrize("kind", ["flat", "hnsw", "ivf"])
def test_index_is_saved_and_reopened_for_the_same_rows_only(tmp_path, clustered_vectors, kind):
    vectors, queries = clustered_vectors
    ids = np.arange(len(vectors)) * 3  # ids are chunk indices, not rows
    config = StoreConfig(index=kind)
    index, reopened = load_or_build(tmp_path, vectors, ids, config, state="rows-v1")
    assert not reopened and index.ntotal == len(vectors)
    again, reopened = load_or_build(tmp_path, vectors, ids, config, state="rows-v1")
    assert reopened
    assert np.array_equal(index.search(queries, 10)[1], again.search(queries, 10)[1])
    assert set(np.unique(again.search(queries, 10)[1])) <= set(ids.tolist())
    _, rebuilt = load_or_build(tmp_path, vectors[:4000], ids[:4000], config, state="rows-v2")
    assert not rebuilt


def test_a_damaged_index_file_is_rebuilt_not_trusted(tmp_path, clustered_vectors):
    vectors, _ = clustered_vectors
    ids = np.arange(len(vectors))
    load_or_build(tmp_path, vectors, ids, StoreConfig(index="flat"), state="s")
    (index_file,) = tmp_path.glob("flat-*.faiss")
    index_file.write_bytes(index_file.read_bytes()[:1000])
    index, reopened = load_or_build(tmp_path, vectors, ids, StoreConfig(index="flat"), state="s")
    assert not reopened and index.ntotal == len(vectors)


def test_search_params_do_not_split_the_saved_index(tmp_path, clustered_vectors):
    vectors, queries = clustered_vectors
    ids = np.arange(len(vectors))
    load_or_build(tmp_path, vectors, ids, StoreConfig(index="hnsw", hnsw_ef_search=16), state="s")
    wide, reopened = load_or_build(tmp_path, vectors, ids, StoreConfig(index="hnsw", hnsw_ef_search=256), state="s")
    assert reopened  # efSearch is a search-time knob: same file, applied on open
    narrow, _ = load_or_build(tmp_path, vectors, ids, StoreConfig(index="hnsw", hnsw_ef_search=16), state="s")
    assert recall_at_k(wide, vectors, ids, queries, 10) >= recall_at_k(narrow, vectors, ids, queries, 10)


def test_recall_is_one_for_flat_and_measured_for_approximate_indexes(tmp_path, clustered_vectors):
    vectors, queries = clustered_vectors
    ids = np.arange(len(vectors))
    flat, _ = load_or_build(tmp_path, vectors, ids, StoreConfig(index="flat"), "s")
    assert recall_at_k(flat, vectors, ids, queries, 10) == 1.0
    ivf_1, _ = load_or_build(tmp_path / "a", vectors, ids, StoreConfig(index="ivf", ivf_nlist=100, ivf_nprobe=1), "s")
    ivf_all, _ = load_or_build(tmp_path / "b", vectors, ids, StoreConfig(index="ivf", ivf_nlist=100,
                                                                         ivf_nprobe=100), "s")
    low, full = recall_at_k(ivf_1, vectors, ids, queries, 10), recall_at_k(ivf_all, vectors, ids, queries, 10)
    assert 0 < low < full and full == pytest.approx(1.0)  # probing every list is exact
    truth = exact_top_k(vectors, ids, queries, 10)
    brute = np.argsort(-(queries @ vectors.T), axis=1)[:, :10]
    assert np.array_equal(truth, brute)


def test_an_index_file_a_killed_save_left_is_swept_and_a_live_writers_kept(tmp_path, clustered_vectors):
    """A kill between FAISS's write and the rename leaves a temp file named after its writer; the next build in
    that folder removes it once the writer is dead, and a failed save leaves nothing."""
    import os
    import subprocess
    import sys

    import faiss

    from kbench.cache import TMP_PREFIX, host_tag

    vectors, _ = clustered_vectors
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    killed = tmp_path / f"{TMP_PREFIX}{host_tag()}-{dead.pid}-abc.faiss"
    live = tmp_path / f"{TMP_PREFIX}{host_tag()}-{os.getpid()}-def.faiss"
    for path in (killed, live):
        path.write_bytes(b"half an index")
    load_or_build(tmp_path, vectors, np.arange(len(vectors)), StoreConfig(index="flat"), state="s")
    assert not killed.exists() and live.exists()
    live.unlink()

    def disk_full(index, name):
        with open(name, "wb") as f:
            f.write(b"part")
        raise OSError("No space left on device")

    original, faiss.write_index = faiss.write_index, disk_full
    try:
        with pytest.raises(OSError, match="No space"):
            load_or_build(tmp_path, vectors, np.arange(len(vectors)), StoreConfig(index="hnsw"), state="s")
    finally:
        faiss.write_index = original
    assert not list(tmp_path.glob(f"{TMP_PREFIX}*")) and not list(tmp_path.glob("hnsw-*"))
