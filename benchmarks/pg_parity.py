"""Parity on full SciFact: DuckDB + FAISS flat vs pgvector exact search through the production SQL functions.

Vector leg: top-10 of every SciFact test query from FAISS flat and from match_archon_crawled_pages.
Production hybrids: each SQL function (Archon, the Archon replication guide and Supabase) against kbench's Python fusion of the same
name over the FAISS vector leg and the function's own text CTE. Every difference is listed.

    .venv/bin/python benchmarks/pg_parity.py [--workspace experiments] [--dsn DSN]

The comparison functions below are also the oracle of tests/store/test_pgvector_store.py.

- Vector leg: FAISS flat top-k (cosine on normalized float32 vectors) vs ``match_archon_crawled_pages``
  (pgvector exact scan, ``<=>``). Lists must be equal; a position where they differ counts as a *tie* when
  the two chunks' cosines differ by less than ``tie_tolerance`` (float32 vs pgvector's arithmetic).
- Production hybrid: the SQL function vs kbench's Python fusion of the same name fed with the FAISS vector
  leg and the function's own text CTE (ts_rank_cd over plainto_tsquery, run as a separate SQL query), so
  the comparison isolates the store and the fusion logic. Result *sets* are compared; differences are
  listed with whether a tie at a LIMIT boundary explains them.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kbench import format_table, load_experiment, prepare_corpus
# What is compared: the vector leg over each store, timed alone, and the Python fusions against the SQL
# functions, so the leg and the fusion registry are used directly.
from kbench.retrieval.registry import FUSIONS
from kbench.retrieval.legs.vector import VectorLeg, VectorParams

HYBRIDS = [("archon_hybrid", {"similarity_threshold": None}),  # the Archon replication guide (no threshold in its SQL)
           ("archon_weighted", {"similarity_threshold": 0.05}),  # Archon
           ("rrf_supabase", {"rrf_k": 10})]  # Supabase

TEXT_LEG_SQL = """
SELECT id::text, {rank}(content_search_vector, plainto_tsquery('english', %s)) AS rank
  FROM archon_crawled_pages
 WHERE content_search_vector @@ plainto_tsquery('english', %s)
 ORDER BY rank DESC
"""


def pg_text_leg(store, query_text: str, limit: int | None, rank: str = "ts_rank_cd") -> list[tuple[int, float]]:
    """The text CTE of Archon and the Archon replication guide (ts_rank_cd, LIMIT) or Supabase (ts_rank, no LIMIT) as its own query:
    [(chunk index, rank)] best first."""
    sql = TEXT_LEG_SQL.format(rank=rank) + (" LIMIT %s" if limit else "")
    with store.conn.cursor() as cur:
        rows = cur.execute(sql, [query_text, query_text] + ([limit] if limit else [])).fetchall()
    return [(store._ids[rid], float(rank)) for rid, rank in rows]


@dataclass
class VectorParity:
    queries: int = 0
    identical: int = 0
    tie_only: int = 0
    differences: list[dict] = field(default_factory=list)  # non-tie differences, one per query
    max_score_diff: float = 0.0


def compare_vector_lists(faiss_results: list[list[tuple[int, float]]], pg_results: list[list[tuple[int, float]]],
                         query_ids: list[str], tie_tolerance: float = 1e-5) -> VectorParity:
    report = VectorParity(queries=len(query_ids))
    for qid, a, b in zip(query_ids, faiss_results, pg_results):
        ids_a, ids_b = [i for i, _ in a], [i for i, _ in b]
        common = set(ids_a) & set(ids_b)
        sa, sb = dict(a), dict(b)
        if common:
            report.max_score_diff = max(report.max_score_diff, max(abs(sa[i] - sb[i]) for i in common))
        if ids_a == ids_b:
            report.identical += 1
            continue
        # every differing position must hold chunks whose scores tie within the tolerance
        ties = len(a) == len(b) and all(abs(x[1] - y[1]) < tie_tolerance for x, y in zip(a, b))
        if ties:
            report.tie_only += 1
        else:
            report.differences.append({"query_id": qid, "faiss": a, "pgvector": b})
    return report


@dataclass
class HybridParity:
    function: str
    queries: int = 0
    same_set: int = 0
    same_order: int = 0
    differences: list[dict] = field(default_factory=list)


def compare_hybrid(function: str, store, queries, query_vectors: np.ndarray, faiss_index, k: int,
                   fusion_params: dict) -> HybridParity:
    """The SQL function ``function`` vs the Python fusion of the same name over FAISS + the SQL text CTE."""
    fusion = FUSIONS.get(function)
    params = fusion.params(**fusion_params)
    if function == "rrf_supabase":  # Supabase's legs have no LIMIT and its text leg ranks with ts_rank
        depth, text_limit, rank = faiss_index.ntotal, None, "ts_rank"
    else:
        depth = params.leg_depth(k)
        text_limit, rank = depth, "ts_rank_cd"
    scores, ids = faiss_index.search(query_vectors, depth)
    report = HybridParity(function)
    for qi, query in enumerate(queries):
        vector_leg = [(int(i), float(s)) for i, s in zip(ids[qi], scores[qi]) if i >= 0]
        text_leg = pg_text_leg(store, query.text, text_limit, rank)
        python = fusion.impl({"vector": vector_leg, "text": text_leg}, params, k)
        threshold = fusion_params.get("similarity_threshold")
        sql = store.hybrid(function, query_vectors[qi], query.text, k,
                           similarity_threshold=-1.0 if threshold is None else threshold)
        py_ids, sql_ids = [h.chunk_index for h in python], [i for i, _, _ in sql]
        report.queries += 1
        if set(py_ids) == set(sql_ids):
            report.same_set += 1
            report.same_order += py_ids == sql_ids
        else:
            report.differences.append({"query_id": query.query_id, "only_python": sorted(set(py_ids) - set(sql_ids)),
                                       "only_sql": sorted(set(sql_ids) - set(py_ids)),
                                       "text_leg_tail_scores": [s for _, s in text_leg[-3:]]})
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", default="experiments")
    parser.add_argument("--dsn", default=None)
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="kbench-pg-parity-"))
    base = {"dataset": {"name": "scifact"}, "chunking": {"strategy": "none"}, "workspace": args.workspace,
            "tracking": {"enabled": False},
            # both stores search exactly; this script compares their results itself (no sampled recall check)
            "store": {"index": "flat", "path": str(scratch / "kbench.duckdb"), "dsn": args.dsn,
                      "pg_datadir": str(scratch / "pgdata"), "recall_sample_queries": 0}}
    duck_exp = load_experiment({**base, "store": {**base["store"], "backend": "duckdb"}})
    pg_exp = load_experiment({**base, "store": {**base["store"], "backend": "pgvector"}})
    # the pipeline loads, chunks, embeds (the second corpus from the embedding cache) and fills each store
    duck = prepare_corpus(duck_exp)
    try:
        pg = prepare_corpus(pg_exp, progress=False)
    except BaseException:
        duck.close()
        raise
    try:
        dataset, embedded = duck.dataset, duck.embedded
        print(f"{len(duck.chunks)} abstracts ({embedded.cache_hits} cached, {embedded.cache_misses} computed), "
              f"{len(dataset.queries)} test queries")
        qv = duck.embedder.embed_queries([q.text for q in dataset.queries])
        duck_s, pg_s = duck.timer.seconds["store"], pg.timer.seconds["store"]
        legs = {name: VectorLeg(corpus.context, VectorParams()) for name, corpus in (("faiss", duck), ("pgvector", pg))}
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
        store = pg.context.store.pg_store  # the open PgVectorStore: its SQL functions and connection
        for function, params in HYBRIDS:
            report = compare_hybrid(function, store, dataset.queries, qv, duck.context.vector_index, args.k, params)
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
        duck.close()


if __name__ == "__main__":
    main()
