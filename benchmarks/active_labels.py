"""How many human labels decide between the top two configs of a sweep: the active order against random order.

A grid of BM25 configs runs once on SciFact's 300 test claims through kbench's own pipeline (``run_pipeline``, as
``kbench run`` would, nothing logged), one unit per abstract (chunking ``none``): the Snowball stemmer or none,
times two BM25 settings (k1 1.2 b 0.75; k1 0.9 b 0.4). The two configs with the best pooled nDCG@10 under
SciFact's qrels are the contenders (``kbench.labelling``'s pool: the union of their top 10 per claim). SciFact's
qrels play the human; a judge with a known error plays the model (``flip``: each grade flipped with probability
0.2; ``lean``: misses 20% of the relevant and calls 30% of the irrelevant relevant where the runner-up ranks them
in its top 5, 5% elsewhere).

Per seed (``--seeds``), the same judge's grades and the page's order for each mode (``kbench.labelling.order``):

- **random**: ``random_share`` 1, whole random questions only (PPI on the labelled questions, the judge on the rest);
- **active-S**: ``random_share`` S for each S of ``--shares`` (0.8, 0.5): the random share alternating with the
  active order, whose human grades replace the judge's in the predictor.

Labels are given in order; every ``--every`` labels the estimate (``labelling.estimate_labels``) is checked:
decided when the PPI++ interval of the difference of the two configs excludes 0 (significantly different, 95%) or
the recommendation's non-inferiority test shows the pick within ``--margin`` of the other (decided). The labels
needed: the first count at which it decides (the whole pool if never). Counts, not seconds: the load of the
machine does not change them.

    .venv/bin/python benchmarks/active_labels.py [--seeds 10] [--every 20] [--shares 0.8,0.5] [--margin 0.01]
        [--judges flip,lean] [--json out.json] [--workspace experiments]
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from kbench import run_pipeline
from kbench.config import validate_experiment
from kbench.evaluation.pooled import pooled_ndcg
from kbench.evaluation.recommend import RecommendConfig
from kbench.labelling.estimate import PoolArrays, estimate_labels
from kbench.labelling.order import label_plan

STEMMERS = {"stem": "snowball_english", "nostem": "none"}
BM25 = {"k1.2-b.75": {"k1": 1.2, "b": 0.75}, "k0.9-b.4": {"k1": 0.9, "b": 0.4}}
K = 10


def run_grid(workspace: Path) -> tuple[dict, dict]:
    """label -> the run's top-10 hits per question; and the dataset's qrels."""
    runs, qrels = {}, None
    for stem_name, stemmer in STEMMERS.items():
        for bm25_name, params in BM25.items():
            experiment = validate_experiment({
                "name": "active-labels", "workspace": str(workspace), "dataset": {"name": "scifact", "split": "test"},
                "chunking": {"strategy": "none"},
                "retrieval": {"legs": ["bm25"], "leg_params": {"bm25": {**params, "stemmer": stemmer}}, "top_k": K},
                "evaluation": {"k": [K]}, "tracking": {"experiment": "active-labels"}})
            result = run_pipeline(experiment, progress=False)
            runs[f"{stem_name}/{bm25_name}"] = {q: [(h.doc_id, h.start, h.end) for h in hits[:K]]
                                                 for q, hits in result.run.hits.items()}
            qrels = result.dataset.qrels
    return runs, qrels


def pool_of(runs: dict, qrels: dict, labels: list[str]):
    questions = sorted(set.intersection(*(set(runs[label]) for label in labels)))
    index, question_of, human = {}, [], []
    for qi, q in enumerate(questions):
        for label in labels:
            for doc, start, end in runs[label][q]:
                if (q, doc, start, end) not in index:
                    index[(q, doc, start, end)] = len(question_of)
                    question_of.append(qi)
                    human.append(float(qrels.get(q, {}).get(doc, 0)))
    ranks = np.zeros((len(labels), len(question_of)), dtype=int)
    for c, label in enumerate(labels):
        for q in questions:
            for rank, key in enumerate(runs[label][q], start=1):
                ranks[c, index[(q, *key)]] = ranks[c, index[(q, *key)]] or rank
    return np.array(question_of), ranks, np.array(human), len(questions)


def judge(kind: str, human: np.ndarray, ranks: np.ndarray, rng) -> np.ndarray:
    u = rng.random(len(human))
    if kind == "flip":
        return np.where(u < 0.2, 1 - human, human)
    leans = (ranks[1] >= 1) & (ranks[1] <= 5)
    return np.where(human > 0, (u >= 0.2).astype(float), (u < np.where(leans, 0.3, 0.05)).astype(float))


def labels_to_decide(arrays: PoolArrays, human: np.ndarray, share: float, seed: int, every: int,
                     config: RecommendConfig) -> tuple[int, str]:
    plan = label_plan(arrays.question_of, arrays.ranks, arrays.model_grades, arrays.n_questions, K, seed=seed,
                      random_share=share)
    order = [p for p, _ in plan.order]
    given = np.full(len(human), np.nan)
    for count in range(every, len(order) + every, every):
        served = order[:count]
        given[served] = human[served]
        found = estimate_labels(arrays, plan, given, recommend_config=config)
        if not found.differences or found.recommendation is None:
            continue
        low, high = found.differences[arrays.configs[1]].ppi.interval(0.05)
        if low > 0 or high < 0:
            return min(count, len(order)), "different"
        if found.recommendation.decided:
            return min(count, len(order)), "within the margin"
    return len(order), "never"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--every", type=int, default=20)
    parser.add_argument("--shares", default="0.8,0.5", help="random shares of the active orders compared")
    parser.add_argument("--margin", type=float, default=0.01)
    parser.add_argument("--judges", default="flip,lean")
    parser.add_argument("--workspace", default="experiments")
    parser.add_argument("--json")
    args = parser.parse_args()
    started = time.perf_counter()
    runs, qrels = run_grid(Path(args.workspace))
    questions = sorted(set.intersection(*(set(r) for r in runs.values())))
    means = {}
    for label in runs:
        question_of, ranks, human, n = pool_of(runs, qrels, [label])
        means[label] = float(pooled_ndcg(human, question_of, ranks, n, K).mean())
    # the top two on the pool of all configs' top 10 (one ideal DCG for all)
    labels = list(runs)
    question_of, ranks, human, n = pool_of(runs, qrels, labels)
    truth = pooled_ndcg(human, question_of, ranks, n, K).mean(axis=1)
    top = [labels[i] for i in np.argsort(-truth)[:2]]
    question_of, ranks, human, n = pool_of(runs, qrels, top)
    scores = pooled_ndcg(human, question_of, ranks, n, K)
    difference = float((scores[0] - scores[1]).mean())
    print(f"SciFact test, {len(questions)} claims; grid of {len(runs)} BM25 configs (pooled nDCG@{K} on all configs' "
          f"pool: " + ", ".join(f"{label} {truth[i]:.4f}" for i, label in enumerate(labels)) + ")")
    print(f"top two: {top[0]} - {top[1]} = {difference:+.4f} on their pool of {len(human)} pairs; margin "
          f"{args.margin}; a label = one (claim, passage) grade; checked every {args.every} labels")
    config = RecommendConfig(margin=args.margin)
    rows = []
    for kind in args.judges.split(","):
        for seed in range(args.seeds):
            model = judge(kind, human, ranks, np.random.default_rng(seed))
            arrays = PoolArrays(question_of, ranks, model, top, K, n)
            for mode, share in (("random", 1.0), *((f"active-{x}", float(x)) for x in args.shares.split(","))):
                needed, how = labels_to_decide(arrays, human, share, seed, args.every, config)
                rows.append({"judge": kind, "seed": seed, "mode": mode, "labels": needed, "decided": how})
    print(f"\n| judge | order | labels to decide: median | mean | min-max | decided (different / within margin / "
          f"never) |\n|---|---|---|---|---|---|")
    for kind in args.judges.split(","):
        for mode in ("random", *(f"active-{x}" for x in args.shares.split(","))):
            found = [r for r in rows if r["judge"] == kind and r["mode"] == mode]
            counts = np.array([r["labels"] for r in found])
            how = [r["decided"] for r in found]
            print(f"| {kind} | {mode} | {np.median(counts):.0f} | {counts.mean():.0f} | {counts.min()}-{counts.max()} | "
                  f"{how.count('different')} / {how.count('within the margin')} / {how.count('never')} |")
    for kind in args.judges.split(","):
        for x in args.shares.split(","):
            ratio = [a["labels"] / r["labels"] for a, r in zip(
                [y for y in rows if y["judge"] == kind and y["mode"] == f"active-{x}"],
                [y for y in rows if y["judge"] == kind and y["mode"] == "random"])]
            print(f"{kind}: active-{x} / random labels, per seed: median {np.median(ratio):.2f} (mean "
                  f"{np.mean(ratio):.2f}) over {len(ratio)} seeds")
    load = os.getloadavg()
    print(f"\n{time.perf_counter() - started:.0f} s; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (labels are "
          "counted, not timed: the load does not change them)")
    if args.json:
        Path(args.json).write_text(json.dumps({"top": top, "difference": difference, "truth": dict(zip(labels, truth.tolist())),
                                               "rows": rows}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
