"""Flat vs HNSW vs IVF on SciFact (all-MiniLM-L6-v2, one vector per abstract): recall@10 against exact search
and per-query latency, side by side in one run; optionally the same indexes in pgvector.

Run from the repository root so the workspace cache holds the full-SciFact embeddings (otherwise the
5,183 abstracts are embedded first, several minutes on 2 cores):

    .venv/bin/python benchmarks/ann_recall.py [--pgvector] [--workspace experiments]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from bench_io import write_json
from kbench import format_table, load_experiment, prepare_corpus, StoreConfig
# What is measured: the store's FAISS index types, built and searched here directly, against exact search.
from kbench.store.faiss_index import VectorIndex, exact_top_k

VARIANTS = [
    ("flat", {"index": "flat"}),
    ("hnsw M=32 efSearch=64", {"index": "hnsw"}),
    ("hnsw M=32 efSearch=16", {"index": "hnsw", "hnsw_ef_search": 16}),
    ("ivf nlist=100 nprobe=10", {"index": "ivf"}),
    ("ivf nlist=100 nprobe=1", {"index": "ivf", "ivf_nprobe": 1}),
]


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(f[f >= 0]) & set(t)) / len(t) for f, t in zip(found, truth)]))


def per_query_ms(search, queries: np.ndarray, k: int) -> np.ndarray:
    search(queries[:1], k)  # warm-up
    times = []
    for q in queries:
        t = time.perf_counter()
        search(q[None, :], k)
        times.append((time.perf_counter() - t) * 1000)
    return np.array(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", default="experiments")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--pgvector", action="store_true", help="also measure pgvector exact / hnsw / ivfflat")
    parser.add_argument("--threads", type=int, default=1,
                        help="FAISS OpenMP threads; 1 (default) because a single query gains nothing from more and "
                             "on a busy machine idle OpenMP workers add tens of milliseconds per call")
    args = parser.parse_args()
    import faiss

    faiss.omp_set_num_threads(args.threads)
    experiment = load_experiment({"dataset": {"name": "scifact"}, "chunking": {"strategy": "none"},
                                  "workspace": args.workspace, "tracking": {"enabled": False}})
    corpus = prepare_corpus(experiment, index=False)  # load, chunk, embed; the indexes are built below
    embedded = corpus.embedded
    print(f"{len(corpus.chunks)} abstracts: {embedded.cache_hits} vectors from the cache, {embedded.cache_misses} "
          f"computed ({corpus.timer.seconds['embed']:.1f} s)")
    ok = np.flatnonzero(embedded.ok_mask)
    vectors = embedded.vectors[ok]
    queries = corpus.embedder.embed_queries([q.text for q in corpus.dataset.queries])
    truth = exact_top_k(vectors, ok, queries, args.k)
    rows = []
    for label, knobs in VARIANTS:
        config = StoreConfig(**knobs)
        t = time.perf_counter()
        index = VectorIndex.build(vectors, config, ids=ok)
        build_s = time.perf_counter() - t
        _, found = index.search(queries, args.k)
        ms = per_query_ms(index.search, queries, args.k)
        rows.append([f"faiss {label}", recall(found, truth), float(np.percentile(ms, 50)),
                     float(np.percentile(ms, 95)), round(build_s, 2)])
    if args.pgvector:
        rows += pgvector_rows(experiment, corpus, queries, truth, args.k)
    flat_p50 = rows[0][2]
    for row in rows:
        row.append(round(row[2] / flat_p50, 2))
    print(f"\nSciFact test: {len(queries)} queries over {len(ok)} abstracts, recall@{args.k} against exact search\n")
    headers = ["index", f"recall@{args.k}", "p50 ms/query", "p95 ms/query", "build s", "p50 / flat"]
    print(format_table(headers, rows))
    write_json("ann_recall", {"queries": len(queries), "abstracts": len(ok), "k": args.k, "threads": args.threads,
                              "rows": [dict(zip(headers, row)) for row in rows]})


def pgvector_rows(experiment, corpus, queries, truth, k) -> list[list]:
    # What is measured: pgvector's index types, so the store is opened and re-indexed here directly
    # (the pipeline's store stage builds one index per run).
    from kbench.store.pgvector_store import PgVectorIndex, PgVectorStore
    from kbench.store.sync import make_collection

    embedded = corpus.embedded
    collection = make_collection(experiment.dataset, experiment.chunking, experiment.enrichment,
                                 experiment.embedding.model, corpus.embedder.cache.namespace, embedded.vectors.shape[1])
    rows = []
    with PgVectorStore(collection) as store:
        store.sync(collection, corpus.dataset.documents, corpus.chunks, embedded.vectors, embedded.failed)
        store.load_id_map(corpus.chunks)
        index = PgVectorIndex(store)
        for label, knobs in [("exact", {"index": "flat"}), ("hnsw m=32 ef_search=64", {"index": "hnsw"}),
                             ("ivfflat lists=100 probes=10", {"index": "ivf"}),
                             ("ivfflat lists=100 probes=1", {"index": "ivf", "ivf_nprobe": 1})]:
            t = time.perf_counter()
            store.apply_index(StoreConfig(**knobs))
            build_s = time.perf_counter() - t
            _, found = index.search(queries, k)
            ms = per_query_ms(index.search, queries, k)
            rows.append([f"pgvector {label}", recall(found, truth), float(np.percentile(ms, 50)),
                         float(np.percentile(ms, 95)), round(build_s, 2)])
    return rows


if __name__ == "__main__":
    main()
