"""Vector search at scale: kbench's FAISS flat / HNSW / IVF indexes against a numpy matrix product, side by side.

Synthetic 384-d float32 vectors (seeded, L2-normalized, drawn around 1,000 random centres so that neighbours
exist, as with real embeddings; uniform random vectors in 384-d have none worth finding) at 10k, 100k and 1M.
Per size and method: index build time, search time per query (one batch of ``--queries`` queries, drawn
from the same distribution and not in the index), recall@10 against the exact numpy top 10, and peak memory.

Peak memory is the process's peak resident set (Linux ``VmHWM``), reset before each method through
``/proc/self/clear_refs`` and reported above the resident set before that method started, so each figure is
what that method's build + search added on top of the vectors already in memory (FAISS's C++ allocations
included, which tracemalloc cannot see). The process's overall ``ru_maxrss`` is reported too.

    .venv/bin/python benchmarks/vector_scale.py [--sizes 10000,100000,1000000] [--queries 200]
"""
from __future__ import annotations

import argparse
import ctypes
import resource
import time

import numpy as np

from bench_io import write_json
from kbench import format_table, StoreConfig
# What is measured: the store's FAISS index types, built and searched here directly, against exact search.
from kbench.store.faiss_index import VectorIndex, exact_top_k

DIM = 384
CENTRES = 1000


def synthetic(n: int, rng: np.random.Generator, centres: np.ndarray, spread: float) -> np.ndarray:
    out = np.empty((n, DIM), dtype=np.float32)
    for start in range(0, n, 100_000):  # in blocks: no float64 copy of a 1M x 384 matrix
        stop = min(n, start + 100_000)
        block = centres[rng.integers(0, len(centres), stop - start)]
        block += spread * rng.standard_normal((stop - start, DIM), dtype=np.float32) / np.sqrt(DIM)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[start:stop] = block
    return out


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def reset_peak() -> int:
    """Reset the peak RSS to the current RSS; returns the current RSS in kB. Freed heap memory is handed back
    first (malloc_trim), so what the previous method freed is not counted as already resident."""
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _status_kb("VmRSS")


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(f[f >= 0].tolist()) & set(t.tolist())) / len(t) for f, t in zip(found, truth)]))


def configs(n: int, args) -> dict[str, StoreConfig | None]:
    nlist = max(1, int(round(np.sqrt(n))))  # the usual rule of thumb: ~sqrt(N) lists
    out: dict[str, StoreConfig | None] = {
        "numpy exact (matrix product)": None,
        "faiss flat": StoreConfig(index="flat"),
        f"faiss hnsw M={args.hnsw_m} efC={args.hnsw_ef_construction} efS={args.hnsw_ef_search}": StoreConfig(
            index="hnsw", hnsw_m=args.hnsw_m, hnsw_ef_construction=args.hnsw_ef_construction,
            hnsw_ef_search=args.hnsw_ef_search),
        f"faiss ivf nlist={nlist} nprobe={args.nprobe}": StoreConfig(index="ivf", ivf_nlist=nlist,
                                                                      ivf_nprobe=args.nprobe),
    }
    if n > args.hnsw_max:
        key = next(k for k in out if k.startswith("faiss hnsw"))
        print(f"  skipping {key} at {n:,}: its build is the slowest part of this benchmark (at 1M on this "
              f"2-core machine it took 268 s); raise --hnsw-max to run it")
        del out[key]
    return out


def measure(n: int, rng, centres, queries, args) -> list[dict]:
    vectors = synthetic(n, rng, centres, args.spread)
    ids = np.arange(n, dtype=np.int64)
    k = args.k
    rows = []
    truth = None
    for label, config in configs(n, args).items():
        before = reset_peak()
        t = time.perf_counter()
        if config is None:
            build_s = 0.0  # the matrix is the index
            found = exact_top_k(vectors, ids, queries, k)
            search_s = time.perf_counter() - t
            truth = found
        else:
            index = VectorIndex.build(vectors, config, ids=ids)
            build_s = time.perf_counter() - t
            index.search(queries[:1], k)  # warm-up
            t = time.perf_counter()
            _, found = index.search(queries, k)
            search_s = time.perf_counter() - t
        peak_mb = (_status_kb("VmHWM") - before) / 1024
        if config is not None:
            del index
        rows.append({"n": n, "method": label, "build_s": build_s, "search_ms_per_query": search_s * 1000 / len(queries),
                     f"recall_at_{k}": recall(found, truth), "peak_mb_above_start": peak_mb})
        print(f"  {label}: build {build_s:.2f} s, search {rows[-1]['search_ms_per_query']:.3f} ms/query, "
              f"recall@{k} {rows[-1][f'recall_at_{k}']:.4f}, peak +{peak_mb:.0f} MB", flush=True)
    base = rows[0]["search_ms_per_query"]
    for row in rows:
        row["search_vs_numpy"] = base / row["search_ms_per_query"]  # > 1: faster than the matrix product
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000", help="comma-separated vector counts")
    parser.add_argument("--queries", type=int, default=200, help="queries, searched as one batch")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--spread", type=float, default=0.6,
                        help="noise norm around a centre (the centres have norm 1); larger = harder for ANN indexes")
    parser.add_argument("--hnsw-m", type=int, default=16)
    parser.add_argument("--hnsw-ef-construction", type=int, default=64)
    parser.add_argument("--hnsw-ef-search", type=int, default=64)
    parser.add_argument("--nprobe", type=int, default=16)
    parser.add_argument("--hnsw-max", type=int, default=100_000,
                        help="largest size HNSW is built at (its build dominates the run on 2 cores)")
    args = parser.parse_args()
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    rng = np.random.default_rng(args.seed)
    centres = rng.standard_normal((CENTRES, DIM), dtype=np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    queries = synthetic(args.queries, rng, centres, args.spread)
    rows = []
    for n in sizes:
        print(f"\n{n:,} x {DIM} vectors ({n * DIM * 4 / 2**20:.0f} MB as float32), {args.queries} queries:", flush=True)
        rows += measure(n, np.random.default_rng([args.seed, n]), centres, queries, args)
    k = args.k
    print(f"\nrecall@{k} against the exact numpy top {k}; search = one batch of {args.queries} queries, per query; "
          f"peak = peak RSS added over the vectors in memory\n")
    print(format_table(["vectors", "method", "build s", "ms/query", "vs numpy", f"recall@{k}", "peak MB"],
                       [[f"{r['n']:,}", r["method"], f"{r['build_s']:.2f}", f"{r['search_ms_per_query']:.3f}",
                         f"{r['search_vs_numpy']:.2f}x", f"{r[f'recall_at_{k}']:.4f}",
                         f"{r['peak_mb_above_start']:.0f}"] for r in rows]))
    maxrss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nprocess peak RSS (ru_maxrss), everything above included: {maxrss_mb:.0f} MB")
    write_json("vector_scale", {"dim": DIM, "queries": args.queries, "k": k, "seed": args.seed,
                                "centres": CENTRES, "spread": args.spread,
                                "peak_memory": "VmHWM reset per method via /proc/self/clear_refs, minus VmRSS "
                                               "at its start",
                                "process_ru_maxrss_mb": maxrss_mb, "rows": rows})


if __name__ == "__main__":
    main()
