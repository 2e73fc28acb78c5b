"""Cross-encoder rerank of 25 candidates per SciFact claim: torch vs ONNX (fp32, int8) vs OpenVINO on the
same model, side by side in one process, with nDCG@10 per backend.

OpenVINO runs twice: at its own choice of precision (bf16 on a CPU with bf16 instructions, as here) and at
f32. The nDCG@10 difference to torch comes with a paired bootstrap 95% interval over the claims: near-tied
candidates swap places under bf16 and int8, so on 20 claims the difference is noise of about +-0.02, and
even SciFact's 300 test claims pin it down to about +-0.006 only.

Candidates are BM25's top 25 over all 5,183 abstracts (kbench's bm25 leg), so the comparison needs no
embedding. The model is ``--model`` (a cross-encoder folder or a name under models_dir(), e.g. one made by
``kbench models train-reranker``); without one, a stand-in: all-MiniLM-L6-v2 with a fresh one-logit head
from a fixed seed. Its rankings mean nothing for relevance (its nDCG is not a reranker's), but it has the
same architecture and cost as a MiniLM cross-encoder, so the time ratios hold, and the backends must agree.

    .venv/bin/python benchmarks/rerank.py [--model NAME] [--queries 20] [--rounds 2] [--max-length N]
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from bench_io import write_json
from kbench import ChunkingConfig, DatasetConfig, chunked_dataset, format_table
from kbench.embedding.models import resolve_model_path
from kbench.embedding.onnx_runtime import computes_in
from kbench.evaluation.metrics.ndcg import ndcg_at_k
from kbench.evaluation.significance import bootstrap_ci
from kbench.retrieval.contracts import SearchContext
from kbench.retrieval.legs.bm25 import BM25Leg, BM25Params
from kbench.retrieval.rerank.cross_encoder import CrossEncoderParams, CrossEncoderReranker, resolve_cross_encoder

# (label, rerank.backend, rerank.precision)
VARIANTS = [("torch", "torch", "auto"), ("onnx", "onnx", "auto"), ("onnx-int8", "onnx-int8", "auto"),
            ("openvino f32", "openvino", "f32"), ("openvino", "openvino", "auto"),
            ("openvino-int8", "openvino-int8", "auto")]


def stand_in_model(folder: Path) -> Path:
    import torch
    from sentence_transformers import CrossEncoder

    torch.manual_seed(0)
    CrossEncoder(str(resolve_model_path("all-MiniLM-L6-v2")), num_labels=1, max_length=256, device="cpu").save(
        str(folder))
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None)
    parser.add_argument("--queries", type=int, default=20, help="judged SciFact test claims reranked")
    parser.add_argument("--candidates", type=int, default=25)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-length", type=int, default=None,
                        help="tokens per (query, abstract) pair; default: the model's own")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    dataset, chunks = chunked_dataset(DatasetConfig(name="scifact"), ChunkingConfig(strategy="none"))
    queries = [q for q in dataset.queries if dataset.qrels.get(q.query_id)][: args.queries]
    context = SearchContext(chunks=chunks)
    first_stage = BM25Leg(context, BM25Params()).search(queries, None, args.candidates)
    candidate_texts = [[chunks[i].text for i, _ in hits] for hits in first_stage]

    with tempfile.TemporaryDirectory() as tmp:
        folder = resolve_cross_encoder(args.model) if args.model else stand_in_model(Path(tmp) / "seeded-minilm-ce")
        rerankers = {label: CrossEncoderReranker(context, CrossEncoderParams(
            model=str(folder), backend=backend, precision=precision, max_length=args.max_length))
                     for label, backend, precision in VARIANTS}
        runs_in = {label: computes_in(backend, "f32" if rerankers[label].onnx is None
                                      else rerankers[label].onnx.precision) for label, backend, _ in VARIANTS}
        times = {label: [] for label in rerankers}
        scores: dict[str, list[list[float]]] = {label: [] for label in rerankers}
        for round_ in range(args.rounds):
            for query, texts in zip(queries, candidate_texts):
                for b, reranker in rerankers.items():  # backends in turn per query: the same load on each
                    t = time.perf_counter()
                    result = reranker.score(query.text, texts)
                    times[b].append(time.perf_counter() - t)
                    if round_ == 0:
                        scores[b].append(result)

    def ndcg10(per_query_scores) -> np.ndarray:
        values = []
        for query, hits, s in zip(queries, first_stage, per_query_scores):
            grades = dataset.qrels[query.query_id]
            order = np.lexsort((np.arange(len(s)), -np.asarray(s)))[:10]
            ranked = [grades.get(chunks[hits[i][0]].doc_id, 0) for i in order]
            values.append(ndcg_at_k(ranked, list(grades.values()), 10))
        return np.asarray(values)

    first_ndcg = float(ndcg10([[-r for r in range(len(h))] for h in first_stage]).mean())
    base = statistics.median(times["torch"])
    torch_ndcg = ndcg10(scores["torch"])
    rows, results = [], []
    for label, backend, precision in VARIANTS:
        p50 = statistics.median(times[label])
        agree = float(np.mean([np.corrcoef(a, t)[0, 1] if len(a) > 1 else 1.0
                               for a, t in zip(scores[label], scores["torch"])]))
        per_query = ndcg10(scores[label])
        gap = per_query - torch_ndcg
        low, high = bootstrap_ci(gap) if label != "torch" else (0.0, 0.0)
        results.append({"backend": backend, "precision": precision, "computes_in": runs_in[label],
                        "p50_ms_per_query": p50 * 1000, "speedup_vs_torch": base / p50,
                        "ndcg_at_10": float(per_query.mean()), "ndcg_at_10_minus_torch": float(gap.mean()),
                        "ndcg_at_10_minus_torch_ci95": [low, high], "score_correlation_with_torch": agree})
        rows.append([label, runs_in[label], f"{p50 * 1000:.0f}", f"{base / p50:.2f}x",
                     f"{per_query.mean():.4f}", f"{gap.mean():+.4f} [{low:+.4f}, {high:+.4f}]", f"{agree:.5f}"])
    print(f"rerank of {args.candidates} BM25 candidates, {len(queries)} SciFact claims x {args.rounds} rounds, "
          f"model {folder.name}{'' if args.model else ' (seeded stand-in, untrained)'}; BM25 alone nDCG@10 "
          f"{first_ndcg:.4f}")
    print(format_table(["backend", "computes in", "p50 ms/query", "vs torch", "nDCG@10",
                        "minus torch [95% CI]", "score corr. with torch"], rows))
    write_json("rerank", {"model": args.model or "seeded stand-in (all-MiniLM-L6-v2 + fresh head, seed 0)",
                          "queries": len(queries), "candidates": args.candidates, "rounds": args.rounds,
                          "bm25_ndcg_at_10": first_ndcg, "results": results})


if __name__ == "__main__":
    main()
