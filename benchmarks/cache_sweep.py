"""A 6-config sweep on the demo set (2 chunkers x 3 retrieval modes), run twice in a fresh workspace.

Prints, per config and in total, the embeddings computed with the content-addressed caches against what a
run without caches computes (every run embeds every chunk), the chunk-cache and store reuse, and the wall
time of the first sweep against a re-run of the same sweep, side by side.

    .venv/bin/python benchmarks/cache_sweep.py [--workspace DIR] [--backend duckdb]
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench_io import write_json
from kbench import format_table, load_experiment, run_experiment

CHUNKERS = {
    "fixed": {"strategy": "fixed", "chunk_size": 600, "chunk_overlap": 100},
    "smart": {"strategy": "smart", "chunk_size": 600},
}
RETRIEVAL = {
    "vector": {"legs": ["vector"]},
    "archon_hybrid": {"legs": ["vector", "postgres_fts"], "fusion": {"strategy": "archon_hybrid"}},
    "rrf": {"legs": ["vector", "bm25"], "fusion": {"strategy": "rrf"}},
}


def configs(workspace: Path, backend: str) -> list[tuple[str, dict]]:
    out = []
    for cname, chunking in CHUNKERS.items():
        for rname, retrieval in RETRIEVAL.items():
            out.append((f"{cname}/{rname}", {
                "name": f"cache-sweep-{cname}-{rname}", "workspace": str(workspace), "dataset": {"name": "demo"},
                "chunking": chunking, "store": {"backend": backend},
                "retrieval": {**retrieval, "top_k": 10, "latency": "batch"},
                "evaluation": {"k": [10]}, "tracking": {"enabled": False},
            }))
    return out


def sweep(workspace: Path, backend: str) -> tuple[list[list], float]:
    rows, start = [], time.perf_counter()
    for label, config in configs(workspace, backend):
        t = time.perf_counter()
        result = run_experiment(load_experiment(config), progress=False, log=False)
        c = result.counts
        rows.append([label, c["chunks"], c["chunks"], c["embeddings_computed"], c["embeddings_cached"],
                     c["chunk_cache_misses"], c["chunk_cache_hits"], c.get("store_pages_written", 0),
                     c.get("store_pages_unchanged", 0), result.metrics.get("chunk_ndcg_at_10", float("nan")),
                     round(time.perf_counter() - t, 1)])
    return rows, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", type=Path, default=None, help="default: a fresh temporary folder")
    parser.add_argument("--backend", default="duckdb", choices=["faiss", "duckdb"])
    args = parser.parse_args()
    workspace = args.workspace or Path(tempfile.mkdtemp(prefix="kbench-cache-sweep-"))
    headers = ["config", "chunks", "no-cache embeds", "embeds computed", "embeds cached", "chunk misses (docs)",
               "chunk hits (docs)", "pages written", "pages unchanged", "chunk nDCG@10", "wall s"]
    results = {}
    for name in ("first sweep", "re-run"):
        rows, seconds = sweep(workspace, args.backend)
        results[name] = (rows, seconds)
        print(f"\n## {name} ({workspace}, store.backend={args.backend})\n")
        print(format_table(headers, rows))
    (first, t1), (again, t2) = results["first sweep"], results["re-run"]
    no_cache = sum(r[2] for r in first)
    print("\n## summary\n")
    print(format_table(["", "embeddings computed", "wall time s"], [
        ["without caches (each of 6 runs embeds all its chunks)", no_cache, float("nan")],
        ["first sweep, empty cache", sum(r[3] for r in first), round(t1, 1)],
        ["re-run of the same sweep", sum(r[3] for r in again), round(t2, 1)],
    ]))
    print(f"\nembeddings computed / no-cache: {sum(r[3] for r in first) / no_cache:.3f} (first sweep), "
          f"{sum(r[3] for r in again) / no_cache:.3f} (re-run); re-run wall time / first: {t2 / t1:.2f}")
    write_json("cache_sweep", {"backend": args.backend, "no_cache_embeddings": no_cache,
                               "first_sweep": {"wall_s": t1, "rows": [dict(zip(headers, r)) for r in first]},
                               "re_run": {"wall_s": t2, "rows": [dict(zip(headers, r)) for r in again]},
                               "re_run_over_first": t2 / t1})


if __name__ == "__main__":
    main()
