"""Parity on full SciFact: DuckDB + FAISS flat vs pgvector exact search through the production SQL functions.

Vector leg: top-10 of every SciFact test query from FAISS flat and from match_archon_crawled_pages.
Production hybrids: each SQL function (references 000, 002, 004) against kbench's Python fusion of the same
name over the FAISS vector leg and the function's own text CTE. Every difference is listed.

    .venv/bin/python benchmarks/pg_parity.py [--workspace experiments] [--dsn DSN]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kbench.chunking import chunk_corpus  # noqa: E402
from kbench.cli.tables import format_table  # noqa: E402
from kbench.config import load_experiment  # noqa: E402
from kbench.datasets import load_dataset  # noqa: E402
from kbench.embedding.stage import CachedEmbedder  # noqa: E402
from kbench.paths import workspace_dir  # noqa: E402
from kbench.retrieval.registry import SearchContext  # noqa: E402
from kbench.retrieval.vector import VectorLeg, VectorParams  # noqa: E402
from kbench.store.parity import compare_hybrid, compare_vector_lists  # noqa: E402
from kbench.store.stage import prepare_store  # noqa: E402

HYBRIDS = [("archon_hybrid", {"similarity_threshold": None}),  # reference 002 (no threshold in its SQL)
           ("archon_weighted", {"similarity_threshold": 0.05}),  # reference 000
           ("rrf_supabase", {"rrf_k": 10})]  # reference 004


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", default="experiments")
    parser.add_argument("--dsn", default=None)
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="kbench-pg-parity-"))
    base = {"dataset": {"name": "scifact"}, "chunking": {"strategy": "none"}, "workspace": args.workspace,
            "tracking": {"enabled": False},
            "store": {"index": "flat", "path": str(scratch / "kbench.duckdb"), "dsn": args.dsn,
                      "pg_datadir": str(scratch / "pgdata")}}
    duck_exp = load_experiment({**base, "store": {**base["store"], "backend": "duckdb"}})
    pg_exp = load_experiment({**base, "store": {**base["store"], "backend": "pgvector"}})
    dataset = load_dataset(duck_exp.dataset)
    chunks = chunk_corpus(dataset.documents, duck_exp.chunking)
    embedder = CachedEmbedder(duck_exp.embedding, workspace_dir(args.workspace) / "cache")
    embedded = embedder.embed([c.text for c in chunks], progress=True)
    print(f"{len(chunks)} abstracts ({embedded.cache_hits} cached, {embedded.cache_misses} computed), "
          f"{len(dataset.queries)} test queries")
    qv = embedder.embed_queries([q.text for q in dataset.queries])
    workspace = workspace_dir(args.workspace)
    t = time.perf_counter()
    duck = prepare_store(duck_exp, dataset, chunks, embedded, embedder, workspace)
    duck_s = time.perf_counter() - t
    t = time.perf_counter()
    pg = prepare_store(pg_exp, dataset, chunks, embedded, embedder, workspace)
    pg_s = time.perf_counter() - t
    try:
        legs = {name: VectorLeg(SearchContext(chunks=chunks, vector_index=s.vector_index), VectorParams())
                for name, s in (("faiss", duck), ("pgvector", pg))}
        timings, lists = {}, {}
        for name, leg in legs.items():
            t = time.perf_counter()
            lists[name] = leg.search(dataset.queries, qv, args.k)
            timings[name] = (time.perf_counter() - t) * 1000 / len(dataset.queries)
        vector = compare_vector_lists(lists["faiss"], lists["pgvector"], [q.query_id for q in dataset.queries])
        print(f"\nload: DuckDB + FAISS flat {duck_s:.1f} s, pgvector {pg_s:.1f} s; "
              f"vector leg per query: FAISS {timings['faiss']:.2f} ms, pgvector SQL {timings['pgvector']:.2f} ms")
        rows = [["vector leg top-10 (match_archon_crawled_pages)", vector.queries, vector.identical,
                 vector.tie_only, len(vector.differences), f"max |cos diff| {vector.max_score_diff:.2e}"]]
        diffs = {"vector": vector.differences}
        store = pg.extras["pg_store"]
        for function, params in HYBRIDS:
            report = compare_hybrid(function, store, dataset.queries, qv, duck.vector_index, args.k, params)
            rows.append([f"{function} result set (SQL vs Python fusion)", report.queries, report.same_set,
                         0, len(report.differences), f"same order {report.same_order}/{report.queries}"])
            diffs[function] = report.differences
        print()
        print(format_table(["comparison", "queries", "identical", "tie-only", "different", "note"], rows))
        for name, items in diffs.items():
            for item in items:
                print(f"difference [{name}]: {json.dumps(item)}")
        if not any(diffs.values()):
            print("\nno differences")
    finally:
        pg.close()


if __name__ == "__main__":
    main()
