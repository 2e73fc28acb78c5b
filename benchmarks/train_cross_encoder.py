"""Train a small cross-encoder locally (offline) for the rerank benchmark: MiniLM-L6 on SciFact's train split.

No PyPI package ships a trained cross-encoder, so this one is made here, in a few minutes of CPU: the
all-MiniLM-L6-v2 encoder with a fresh one-logit head, trained listwise (softmax over a relevant abstract and
``--negatives`` hard negatives) with BM25 negatives: a seeded sample of the top ``--mine-depth`` of kbench's
bm25 leg for each training claim that are not judged relevant. Train and test claims are disjoint (BEIR's
SciFact splits), so the test nDCG of benchmarks/rerank.py is out of sample. The loop is kbench's own
(``kbench.training.reranker.fit_cross_encoder``); only the negatives differ from ``kbench models
train-reranker`` (which mines them with MiniLM vector search, and so first embeds all 5,183 abstracts).

The model is saved as a CrossEncoder folder under models_dir()/<--out> with ``kbench_model.json`` (never
committed); ``benchmarks/rerank.py --model <--out>`` then uses it.

    .venv/bin/python benchmarks/train_cross_encoder.py [--out scifact-minilm-ce-bm25] [--max-length 128]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
import time
from datetime import datetime, timezone

from kbench import ChunkingConfig, DatasetConfig, chunked_dataset
from kbench.paths import models_dir
from kbench.retrieval.contracts import SearchContext
from kbench.retrieval.legs.bm25 import BM25Leg, BM25Params
from kbench.training.reranker import (MODEL_CARD, TrainingPair, fit_cross_encoder, load_base_cross_encoder,
                                      positive_chunks)


def bm25_pairs(dataset, chunks, negatives: int, depth: int, seed: int) -> tuple[list[TrainingPair], dict]:
    rng = random.Random(seed)
    positives = positive_chunks(dataset, chunks)
    queries = [q for q in dataset.queries if positives[q.query_id]]
    first_stage = BM25Leg(SearchContext(chunks=chunks), BM25Params()).search(queries, None, depth)
    pairs, found = [], 0
    for q, hits in zip(queries, first_stage):
        pos = positives[q.query_id]
        found += len(pos.intersection(i for i, _ in hits))
        pool = [i for i, _ in hits if i not in pos]
        pairs += [TrainingPair(q.text, chunks[i].text, 1.0, q.query_id) for i in sorted(pos)]
        pairs += [TrainingPair(q.text, chunks[i].text, 0.0, q.query_id) for i in rng.sample(pool, min(negatives, len(pool)))]
    stats = {"queries": len(queries), "positives": sum(len(positives[q.query_id]) for q in queries),
             "negatives": sum(1 for p in pairs if p.label == 0.0), "positives_in_bm25_top": found}
    return pairs, stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="scifact-minilm-ce-bm25")
    parser.add_argument("--negatives", type=int, default=3)
    parser.add_argument("--mine-depth", type=int, default=20)
    parser.add_argument("--max-length", type=int, default=128, help="tokens per (claim, abstract) pair")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--force", action="store_true", help="replace an existing model of that name")
    parser.add_argument("--if-missing", action="store_true", help="do nothing when the model exists (make bench)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    target = models_dir() / args.out
    if target.exists() and args.if_missing and not args.force:
        print(f"{target} exists: not trained again (--force does)")
        return
    if target.exists() and not args.force:
        raise SystemExit(f"{target} exists; pass --force to train it again")

    started = time.perf_counter()
    dataset, chunks = chunked_dataset(DatasetConfig(name="scifact", split="train"), ChunkingConfig(strategy="none"))
    pairs, stats = bm25_pairs(dataset, chunks, args.negatives, args.mine_depth, args.seed)
    print(f"SciFact train: {stats['queries']} claims, {stats['positives']} positives, {stats['negatives']} BM25 "
          f"negatives (top {args.mine_depth})", flush=True)
    model = load_base_cross_encoder("all-MiniLM-L6-v2", args.max_length, args.seed)
    losses = fit_cross_encoder(model, pairs, loss="listwise", epochs=args.epochs, batch_size=args.batch_size,
                               learning_rate=1e-4, head_learning_rate=1e-3, warmup_fraction=0.1, seed=args.seed,
                               log=lambda m: print(m, flush=True))
    card = {"kind": "cross_encoder", "base": "all-MiniLM-L6-v2", "dataset": "scifact", "split": "train",
            "first_stage": f"bm25 top-{args.mine_depth}", "counts": {**stats, "pairs": len(pairs)},
            "training": {"epochs": args.epochs, "negatives": args.negatives, "max_length": args.max_length,
                         "batch_size": args.batch_size, "loss": "listwise", "learning_rate": 1e-4,
                         "head_learning_rate": 1e-3, "seed": args.seed},
            "loss_first_window": losses[0] if losses else None, "loss_last_window": losses[-1] if losses else None,
            "train_seconds": round(time.perf_counter() - started, 1), "made_by": "benchmarks/train_cross_encoder.py",
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = tempfile.mkdtemp(dir=target.parent, prefix=f".{args.out}-")
    try:  # saved beside and renamed: a crash never leaves half a model under the name
        model.save(tmp)
        with open(os.path.join(tmp, MODEL_CARD), "w", encoding="utf-8") as f:
            json.dump(card, f, indent=2)
        if target.exists():
            shutil.rmtree(target)
        os.rename(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    print(f"saved {target} ({card['train_seconds']} s)")


if __name__ == "__main__":
    main()
