"""Every retrieval mode on SciFact's test split, rerank off and on, in one run.

Each mode is its shipped config, ``configs/retrieval/<mode>.yaml`` and ``<mode>_rerank.yaml``, run with
``dataset.name=scifact`` and ``chunking.strategy=none`` (one chunk per abstract, all-MiniLM-L6-v2), exactly
as ``kbench run`` would, and logged to MLflow (experiment ``retrieval``). ``weighted`` is a small grid of
weights (the vector leg's share); its best row by nDCG@10 is marked.

    .venv/bin/python benchmarks/retrieval_modes.py [--reranker scifact-minilm-ce] [--modes vector,rrf]
                                                   [--weights 0.3,0.5,0.7] [--no-log]

The rerank rows need a trained cross-encoder (``kbench models train-reranker --dataset scifact --split
train --out scifact-minilm-ce``); the benchmark stops with that message before any work when it is missing.
Latency is per query and per stage (``retrieval.latency: per_query``): p50 of the total, and of the rerank
stage alone. Both columns come from the same process, one mode after the other, on the same machine.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kbench import ConfigError, load_experiment, run_experiment, RunResult
# Finds the trained cross-encoder (or says how to train it) before any run; no public preflight exists.
from kbench.retrieval.rerank.cross_encoder import resolve_cross_encoder

CONFIGS = Path(__file__).resolve().parent.parent / "configs" / "retrieval"
MODES = ["vector", "bm25", "postgres_fts", "archon_hybrid", "archon_weighted", "weighted", "rrf", "rrf_supabase"]


def run_mode(mode: str, rerank: bool, overrides: list[str], log: bool) -> RunResult:
    config = CONFIGS / f"{mode}{'_rerank' if rerank else ''}.yaml"
    experiment = load_experiment(config, ["dataset.name=scifact", "chunking.strategy=none", *overrides])
    return run_experiment(experiment, progress=False, log=log)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reranker", default="scifact-minilm-ce", help="a trained cross-encoder's name or path")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated, from " + ", ".join(MODES))
    parser.add_argument("--weights", default="0.3,0.5,0.7", help="weighted: the vector leg's weights to try")
    parser.add_argument("--no-log", action="store_true", help="do not log the runs to MLflow")
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        print(f"--modes: unknown {', '.join(unknown)}; choose from {', '.join(MODES)}", file=sys.stderr)
        return 2
    try:
        resolve_cross_encoder(args.reranker)
    except ConfigError as e:
        print(f"--reranker: {e}", file=sys.stderr)
        return 2

    rows = []  # (label, off metrics, on metrics)
    for mode in modes:
        variants = ([(f"weighted w={w}", [f"retrieval.fusion.weight={w}"]) for w in args.weights.split(",")]
                    if mode == "weighted" else [(mode, [])])
        for label, overrides in variants:
            off = run_mode(mode, False, overrides, not args.no_log).metrics
            on_run = run_mode(mode, True, [*overrides, f"rerank.model={args.reranker}"], not args.no_log)
            rows.append((label, off, on_run.metrics))
            print(f"done: {label}", file=sys.stderr, flush=True)

    weighted = [r for r in rows if r[0].startswith("weighted")]
    best_weighted = max(weighted, key=lambda r: r[1]["doc_ndcg_at_10"])[0] if weighted else None
    print(f"\nSciFact test ({int(rows[0][1]['count_queries'])} queries, {int(rows[0][1]['count_chunks'])} abstracts), "
          f"{on_run.experiment.embedding.model}, one chunk per abstract; rerank: {args.reranker} over the best "
          f"{on_run.experiment.rerank.params.max_candidates or 'top_k x candidate_multiplier'}\n")
    head = (f"{'mode':24s} {'nDCG@10':>8s} {'+rerank':>8s} {'R@100':>7s} {'+rerank':>8s} "
            f"{'MRR@10':>7s} {'+rerank':>8s} {'p50 ms':>7s} {'+rerank':>8s} {'rerank p50':>10s}")
    print(head)
    print("-" * len(head))
    for label, off, on in rows:
        mark = " *" if label == best_weighted else ""
        print(f"{label + mark:24s} {off['doc_ndcg_at_10']:8.4f} {on['doc_ndcg_at_10']:8.4f} "
              f"{off['doc_recall_at_100']:7.4f} {on['doc_recall_at_100']:8.4f} "
              f"{off['doc_mrr_at_10']:7.4f} {on['doc_mrr_at_10']:8.4f} "
              f"{off['latency_ms_total_p50']:7.2f} {on['latency_ms_total_p50']:8.2f} "
              f"{on['latency_ms_rerank_p50']:10.2f}")
    if best_weighted:
        print("\n* the best weighted row by nDCG@10 (rerank off)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
