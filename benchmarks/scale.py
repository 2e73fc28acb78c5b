"""Index build cost as the corpus grows: 1k, 10k, 100k and 1M chunks through kbench's store write path.

Per size and store backend, one fresh build: ``chunk_dataset`` (the real chunker and chunk cache) on a
synthetic corpus, then ``prepare_store`` (the pipeline's store stage) with the vectors. ``faiss`` is the
default in-memory index; ``duckdb`` syncs the rows into production's archon_crawled_pages shape in a DuckDB
file and builds and saves the FAISS index beside it. Reported: seconds per stage, chunks per second, peak
memory above the process's memory before the build, and the DuckDB file size.

Stand-ins, said plainly: the corpus is synthetic (documents of ~60 words drawn from a fixed vocabulary with a
seed, one chunk each under ``chunking.strategy: none``), and the vectors are synthetic 384-d (MiniLM's
width), seeded and L2-normalized, not a model's output: encoding 1M texts with MiniLM takes hours here and
would measure the encoder (benchmarks/encoding.py does that), not the index. The embedder handed to the
store is the real MiniLM ``CachedEmbedder`` (its cache namespace names the collection); it encodes nothing.

DuckDB's write memory: every row carries production's five per-dimension columns (384 to 3072), and DuckDB holds
a NULL FLOAT[N] with its N child values, so an uncompressed row is ~27 KB at 384-d; kept in transaction memory
until COMMIT, 100k rows held +6.0 GB here. The store now writes whole small row groups to the file inside the
transaction (kbench/store/duckdb_store.py ``attach``): 100k chunks +1.0 GB; 1M chunks (run alone, ``--sizes 1000000
--backends duckdb --duckdb-max 1000000``) 34 s chunking + 164 s store, +6.6 GB peak (faiss alone at 1M: +4.0 GB,
mostly the chunk records), a 1.7 GB file. ``--duckdb-max`` stays 100k so that ``make bench`` keeps within 30 min.

Peak memory: Linux ``VmHWM`` reset through ``/proc/self/clear_refs`` before each build, minus the resident
set at that point (the corpus and the vectors already in memory are not counted), as in vector_scale.py.

    .venv/bin/python benchmarks/scale.py [--sizes 1000,10000,100000,1000000] [--backends faiss,duckdb]
"""
from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from bench_io import write_json
from kbench import format_table, load_experiment
from kbench.embedding.config import EmbeddingConfig
from kbench.embedding.stage import CachedEmbedder, EmbeddingResult
from kbench.pipeline import chunk_dataset
from kbench.records import Dataset, Document, Query
from kbench.store.stage import prepare_store
from kbench.store.sync import make_collection
from vector_scale import _status_kb, reset_peak

DIM = 384
WORDS_PER_DOC = 60


def synthetic_corpus(n: int, seed: int = 0) -> Dataset:
    rng = np.random.default_rng(seed)
    vocabulary = np.array([f"w{i}" for i in range(20_000)])
    # Zipf-like word choice, as in text: a few words everywhere, most rare
    weights = 1.0 / np.arange(1, len(vocabulary) + 1)
    weights /= weights.sum()
    docs = []
    for start in range(0, n, 100_000):
        stop = min(n, start + 100_000)
        words = vocabulary[rng.choice(len(vocabulary), size=(stop - start, WORDS_PER_DOC), p=weights)]
        docs.extend(Document(doc_id=f"d{start + i}", text=" ".join(row), url=f"synthetic/d{start + i}")
                    for i, row in enumerate(words))
    return Dataset(name=f"synthetic-{n}", documents=docs, queries=[Query("q0", "w1 w2")])


def synthetic_vectors(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.empty((n, DIM), dtype=np.float32)
    for start in range(0, n, 100_000):
        block = rng.standard_normal((min(n, start + 100_000) - start, DIM), dtype=np.float32)
        out[start : start + len(block)] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def build(n: int, backend: str, embedder: CachedEmbedder, workspace: Path) -> dict:
    dataset = synthetic_corpus(n)
    vectors = synthetic_vectors(n)
    experiment = load_experiment({
        "name": f"scale-{n}-{backend}", "workspace": str(workspace), "dataset": {"path": str(workspace)},
        "chunking": {"strategy": "none"},
        # the store file named here: KBENCH_WORKSPACE, when set, would otherwise put every size in one file
        "store": {"backend": backend, "recall_sample_queries": 0, "path": str(workspace / "kbench.duckdb")},
        "tracking": {"enabled": False}})
    before_kb = reset_peak()
    t0 = time.perf_counter()
    chunks = chunk_dataset(dataset, experiment.chunking, cache_dir=workspace / "cache")
    t1 = time.perf_counter()
    collection = make_collection(experiment.dataset, experiment.chunking, experiment.enrichment,
                                 experiment.embedding.model, embedder.cache.namespace, vectors.shape[1])
    stored = prepare_store(experiment.store, collection, dataset, chunks, EmbeddingResult(vectors), workspace)
    t2 = time.perf_counter()
    peak_mb = (_status_kb("VmHWM") - before_kb) / 1024
    assert stored.vector_index is not None and len(stored.ok_ids) == n, (len(stored.ok_ids), n)
    db = experiment.store.duckdb_path(workspace)
    row = {"chunks": n, "backend": backend, "chunk_s": t1 - t0, "store_s": t2 - t1, "total_s": t2 - t0,
           "chunks_per_s": n / (t2 - t0), "peak_mb": peak_mb,
           "duckdb_mb": db.stat().st_size / 2**20 if backend == "duckdb" and db.exists() else None}
    del stored, chunks, dataset, vectors
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000,1000000")
    parser.add_argument("--backends", default="faiss,duckdb")
    parser.add_argument("--duckdb-max", type=int, default=100_000,
                        help="largest size built through duckdb (+1.0 GB peak at 100k here; 1M: 198 s, +6.6 GB)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    embedder = CachedEmbedder(EmbeddingConfig(), Path(tempfile.mkdtemp()) / "unused")
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        for backend in args.backends.split(","):
            if backend == "duckdb" and n > args.duckdb_max:
                print(f"{n:>9,} chunks  duckdb  skipped: above --duckdb-max {args.duckdb_max:,} (at 100k the DuckDB "
                      "store took 69 s and +1.0 GB peak here; 1M 164 s and +6.6 GB)", flush=True)
                continue
            with tempfile.TemporaryDirectory(prefix="kbench-scale-") as tmp:
                row = build(n, backend, embedder, Path(tmp))
            rows.append(row)
            print(f"{n:>9,} chunks  {backend:7s} chunk {row['chunk_s']:7.1f} s  store {row['store_s']:7.1f} s  "
                  f"{row['chunks_per_s']:9.0f} chunks/s  peak +{row['peak_mb']:7.0f} MB", flush=True)
            write_json("scale", {"dimension": DIM, "vectors": "synthetic", "rows": rows})
    print("\n## index build through the store stage (synthetic 384-d vectors, one chunk per document)\n")
    print(format_table(["chunks", "backend", "chunk s", "store s", "chunks/s", "peak MB", "duckdb file MB"],
                       [[f"{r['chunks']:,}", r["backend"], f"{r['chunk_s']:.2f}", f"{r['store_s']:.2f}",
                         f"{r['chunks_per_s']:.0f}", f"{r['peak_mb']:.0f}",
                         "-" if r["duckdb_mb"] is None else f"{r['duckdb_mb']:.0f}"] for r in rows]))
    print(f"\nprocess peak RSS (ru_maxrss): {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    # growth: time per chunk at the largest size over the smallest (1.0 = linear)
    for backend in args.backends.split(","):
        mine = [r for r in rows if r["backend"] == backend]
        if len(mine) > 1:
            a, b = mine[0], mine[-1]
            print(f"{backend}: {b['chunks'] / a['chunks']:.0f}x the chunks cost {b['total_s'] / a['total_s']:.0f}x "
                  f"the time ({(b['total_s'] / b['chunks']) / (a['total_s'] / a['chunks']):.2f}x per chunk)")


if __name__ == "__main__":
    main()
