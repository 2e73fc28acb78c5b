"""Embedding speed per model and backend, side by side in one process, with SciFact nDCG@10 per backend.

For each model: passages/s of torch, onnx, onnx-int8 and openvino on the same SciFact abstracts (rounds
interleaved, best round kept); kbench's indexing path (``CachedEmbedder.embed``, cold cache) against a bare
``SentenceTransformer.encode`` on the same texts (the pipeline's overhead); single-query p50 per backend;
what each change buys on its own (length-sorted batches, threads, int8); and nDCG@10 per backend on a
SciFact sample (the test queries' relevant abstracts plus other abstracts, exact search). Static models
(wordllama, model2vec) and the shipped ONNX paraphrase-MiniLM-L3-v2 get throughput and nDCG too.

    .venv/bin/python benchmarks/encoding.py [--passages 128] [--ndcg-queries 100] [--ndcg-docs 500]

nDCG on a sample is higher than on the full corpus (fewer distractors): compare backends with it, not
with published full-SciFact figures.
"""
from __future__ import annotations

import argparse
import os
import random
import tempfile
from pathlib import Path

import numpy as np

from bench_io import interleaved_best, p50_ms, write_json
from kbench import DatasetConfig, format_table, load_dataset
from kbench.cache import EmbeddingCache
from kbench.embedding.config import EmbeddingConfig
from kbench.embedding.models import CATALOGUE, resolve_model_path
from kbench.embedding.onnx_runtime import computes_in
from kbench.embedding.stage import CachedEmbedder, l2_normalize, load_encoder
from kbench.evaluation.metrics.ndcg import ndcg_at_k

TRANSFORMER_BACKENDS = ["torch", "onnx", "onnx-int8", "openvino"]


def sample(dataset, n_queries: int, n_docs: int, seed: int = 0):
    """The first n_queries judged test queries, their relevant abstracts, and other abstracts up to n_docs."""
    queries = [q for q in dataset.queries if dataset.qrels.get(q.query_id)][:n_queries]
    relevant = {d for q in queries for d in dataset.qrels[q.query_id]}
    others = [d for d in dataset.documents if d.doc_id not in relevant]
    random.Random(seed).shuffle(others)
    docs = [d for d in dataset.documents if d.doc_id in relevant] + others[: max(0, n_docs - len(relevant))]
    return queries, docs


def ndcg10(encoder, queries, docs, qrels) -> float:
    d = l2_normalize(encoder.encode([x.text for x in docs]))
    q = l2_normalize(encoder.encode([x.text for x in queries], for_queries=True))
    top = np.argsort(-(q @ d.T), axis=1)[:, :10]
    scores = []
    for row, query in zip(top, queries):
        grades = qrels[query.query_id]
        ranked = [grades.get(docs[i].doc_id, 0) for i in row]
        scores.append(ndcg_at_k(ranked, list(grades.values()), 10))
    return float(np.mean(scores))


def bench_transformer(model: str, texts, query_texts, queries, docs, qrels, rounds: int, backends, results):
    print(f"\n== {model}: {len(texts)} abstracts, {rounds} interleaved rounds ==", flush=True)
    encoders = {b: load_encoder(EmbeddingConfig(model=model, backend=b)) for b in backends}
    times = interleaved_best(rounds, {b: (lambda e=e: e.encode(texts)) for b, e in encoders.items()})
    base = times["torch"]
    for b in backends:
        # OpenVINO picks bf16 on a CPU with bf16 instructions (embedding.precision: auto): the row says so
        runs_in = computes_in(b, encoders[b].onnx.precision if encoders[b].onnx is not None else "f32")
        results.append({"model": model, "backend": b, "computes_in": runs_in, "dimension": encoders[b].dimension,
                        "passages_per_s": len(texts) / times[b], "speedup_vs_torch": base / times[b]})
        print(f"{b:10s} {len(texts) / times[b]:8.1f} passages/s  {base / times[b]:.2f}x torch ({runs_in})",
              flush=True)
    mine = [r for r in results if r["model"] == model]
    for row, b in zip(mine, backends):
        row["query_p50_ms"] = p50_ms(lambda t, e=encoders[b]: e.encode([t], for_queries=True), query_texts)
        all_threads = load_encoder(EmbeddingConfig(model=model, backend=b, query_threads=None))
        row["query_p50_ms_all_threads"] = p50_ms(lambda t, e=all_threads: e.encode([t], for_queries=True),
                                                 query_texts)
        print(f"{b:10s} query p50 {row['query_p50_ms']:.1f} ms (query_threads 1), "
              f"{row['query_p50_ms_all_threads']:.1f} ms (runtime default threads)", flush=True)
    for row, b in zip(mine, backends):
        row["ndcg_at_10_sample"] = ndcg10(encoders[b], queries, docs, qrels) if queries else None
        if row["ndcg_at_10_sample"] is not None:
            print(f"{b:10s} nDCG@10 (sample) {row['ndcg_at_10_sample']:.4f}", flush=True)
    print(format_table(["backend", "computes in", "passages/s", "vs torch", "query p50 ms",
                        "query p50 ms, all threads", "nDCG@10 (sample)"],
                       [[r["backend"], r["computes_in"], f"{r['passages_per_s']:.1f}", f"{r['speedup_vs_torch']:.2f}x",
                         f"{r['query_p50_ms']:.1f}", f"{r['query_p50_ms_all_threads']:.1f}",
                         "-" if r["ndcg_at_10_sample"] is None else f"{r['ndcg_at_10_sample']:.4f}"] for r in mine]))


def bench_overhead(model: str, texts, rounds: int) -> dict:
    """kbench's indexing path (cold cache) vs the bare library call on the same texts."""
    from sentence_transformers import SentenceTransformer

    bare = SentenceTransformer(str(resolve_model_path(model)), device="cpu", local_files_only=True)
    embedder = CachedEmbedder(EmbeddingConfig(model=model), Path(tempfile.gettempdir()) / "kbench-unused")

    def through_kbench():
        with tempfile.TemporaryDirectory() as tmp:  # cold cache every round: every text is encoded
            embedder.cache = EmbeddingCache(Path(tmp), embedder.fingerprint)
            embedder.embed(texts)

    times = interleaved_best(rounds, {
        "bare SentenceTransformer.encode": lambda: bare.encode(texts, batch_size=64, convert_to_numpy=True),
        "kbench CachedEmbedder.embed (torch)": through_kbench,
    })
    bare_t, ours = times["bare SentenceTransformer.encode"], times["kbench CachedEmbedder.embed (torch)"]
    print(f"pipeline overhead: kbench {ours:.2f}s vs bare {bare_t:.2f}s = {100 * (ours / bare_t - 1):+.1f}%")
    return {"bare_s": bare_t, "kbench_s": ours, "overhead_pct": 100 * (ours / bare_t - 1)}


def bench_changes(model: str, texts, rounds: int) -> dict:
    """Each change alone, on ONNX Runtime: length-sorted batches, int8, threads, OpenVINO."""
    shuffled = list(texts)
    random.Random(1).shuffle(shuffled)
    fp32 = load_encoder(EmbeddingConfig(model=model, backend="onnx"))
    one = load_encoder(EmbeddingConfig(model=model, backend="onnx", threads=1))
    int8 = load_encoder(EmbeddingConfig(model=model, backend="onnx-int8"))
    batch = fp32.config.batch_size

    def unsorted():  # batches in arrival order: each pads to its longest text
        for i in range(0, len(shuffled), batch):
            fp32.encode(shuffled[i : i + batch])

    times = interleaved_best(rounds, {
        "onnx, batches in arrival order": unsorted,
        "onnx, length-sorted batches": lambda: fp32.encode(shuffled),
        "onnx, 1 thread": lambda: one.encode(shuffled),
        "onnx-int8": lambda: int8.encode(shuffled),
    })
    ref = times["onnx, length-sorted batches"]
    rows = [[name, f"{t:.2f}", f"{times['onnx, batches in arrival order'] / t:.2f}x"] for name, t in times.items()]
    print("\nwhat each change buys (same texts, shuffled):")
    print(format_table(["variant", "seconds", "vs arrival-order batches"], rows))
    return {"seconds": times, "length_sorting_speedup": times["onnx, batches in arrival order"] / ref,
            "two_threads_vs_one": times["onnx, 1 thread"] / ref, "int8_vs_fp32": ref / times["onnx-int8"]}


def bench_light(texts, queries, docs, qrels, rounds: int, results) -> None:
    configs = {
        "paraphrase-MiniLM-L3-v2 (onnx)": EmbeddingConfig(model="paraphrase-MiniLM-L3-v2", backend="onnx"),
        "wordllama-l2-supercat": EmbeddingConfig(model="wordllama-l2-supercat", provider="static"),
        "wordllama-l2-supercat dim 64": EmbeddingConfig(model="wordllama-l2-supercat", provider="static", dimension=64),
        "tokenlearn-static-64": EmbeddingConfig(model="tokenlearn-static-64", provider="static"),
    }
    encoders = {name: load_encoder(c) for name, c in configs.items()}
    times = interleaved_best(rounds, {n: (lambda e=e: e.encode(texts)) for n, e in encoders.items()})
    rows = []
    for name, e in encoders.items():
        score = ndcg10(e, queries, docs, qrels) if queries else None
        results.append({"model": name, "backend": configs[name].backend if configs[name].provider != "static"
                        else "static", "dimension": e.dimension, "passages_per_s": len(texts) / times[name],
                        "ndcg_at_10_sample": score})
        rows.append([name, e.dimension, f"{len(texts) / times[name]:.1f}", "-" if score is None else f"{score:.4f}"])
    print("\n== light models ==")
    print(format_table(["model", "dim", "passages/s", "nDCG@10 (sample)"], rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="all-MiniLM-L6-v2,all-mpnet-base-v2")
    parser.add_argument("--skip-light", action="store_true", help="no static / paraphrase-MiniLM-L3 models")
    parser.add_argument("--passages", type=int, default=128, help="abstracts timed per backend (MiniLM)")
    parser.add_argument("--mpnet-passages", type=int, default=32, help="abstracts timed per backend (mpnet)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--query-count", type=int, default=30, help="single queries timed for the p50")
    parser.add_argument("--ndcg-queries", type=int, default=100)
    parser.add_argument("--ndcg-docs", type=int, default=500)
    parser.add_argument("--mpnet-ndcg-docs", type=int, default=200)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    dataset = load_dataset(DatasetConfig(name="scifact"))
    pool = sorted(dataset.documents, key=lambda d: d.doc_id)
    random.Random(0).shuffle(pool)
    query_texts = [q.text for q in dataset.queries[: args.query_count]]
    results: list[dict] = []
    payload: dict = {"sample": {"passages": args.passages, "ndcg_queries": args.ndcg_queries,
                                "ndcg_docs": args.ndcg_docs, "mpnet_ndcg_docs": args.mpnet_ndcg_docs,
                                "mpnet_passages": args.mpnet_passages, "rounds": args.rounds}}
    for model in filter(None, args.models.split(",")):
        if CATALOGUE[model].locate() is None:
            print(f"\n{model}: not installed, skipped ({CATALOGUE[model].install})")
            continue
        mpnet = "mpnet" in model
        n = args.mpnet_passages if mpnet else args.passages
        texts = [d.text for d in pool[:n]]
        queries, docs = sample(dataset, args.ndcg_queries, args.mpnet_ndcg_docs if mpnet else args.ndcg_docs)
        backends = [b for b in TRANSFORMER_BACKENDS if b in CATALOGUE[model].backends]  # mpnet: no int8
        bench_transformer(model, texts, query_texts, queries, docs, dataset.qrels, args.rounds, backends, results)
        payload.setdefault("pipeline_overhead", {})[model] = bench_overhead(model, texts, args.rounds)
        if not mpnet:
            payload["changes"] = bench_changes(model, texts, args.rounds)
        write_json("encoding", {**payload, "results": results})  # what is measured so far survives a stop
    if args.skip_light:
        return
    queries, docs = sample(dataset, args.ndcg_queries, args.ndcg_docs)
    bench_light([d.text for d in pool[: args.passages * 4]], queries, docs, dataset.qrels, args.rounds, results)
    payload["results"] = results
    write_json("encoding", payload)


if __name__ == "__main__":
    main()
