"""Search economy: a 48-config grid searched in full, by racing and stage by stage, compute side by side.

Two grids of 48 configs, each on the demo set and on a SciFact sample (every judged document plus a seeded sample
up to ``--documents``; all 300 test claims):

- ``--grid embedding`` (default): 4 chunkings x 2 embedders x 3 retrieval modes x 2 RRF k. Embedding is
  almost all of its compute, and a race scores every config on its first batch, so every corpus is embedded:
  a race cannot save much here, stage-wise search can.
- ``--grid rerank``: 2 chunkings x 3 retrieval modes x 2 RRF k x rerank (off, or a cross-encoder over the
  first stage's top 10, 20 or 30), one embedder. Scoring is most of its compute, as with any reranker, LLM
  query rewriting or LLM judge: the kind of grid a race is for. It needs a trained cross-encoder (``--reranker``,
  default ``scifact-minilm-ce``: ``kbench models train-reranker --dataset scifact --split train --out NAME``).

Each strategy runs in its own fresh workspace (cold caches: every corpus it needs is embedded by it) through the
same ``ConfigScorer``, so all are counted the same way:

- full: every config scored on every question, compared as a grid sweep compares its children;
- race: ``search: {strategy: race}`` (alpha 0.05, Bonferroni over rounds x comparisons);
- stagewise: ``search: {strategy: stagewise, order: [chunking, embedding, retrieval, rerank]}``;
- stagewise+race: the same with ``race: true`` (each stage raced, alpha 0.05 split over the stages raced).

Per strategy: configs scored, corpora embedded (and the configs they serve), config-question scorings,
embedding seconds, search seconds (reranking included), their sum and its ratio to the full grid's, the
recommended config and whether it is in the full grid's top tie (the best and every config not significantly
worse). The done-when of issue 34: the race's pick in the full grid's top tie at <= 35% of its compute;
stage-wise's agreement said. A race saves in proportion to the compute the grid spends on configs that are
clearly worse: a costly reranker that hurts leaves in the first rounds, one that helps stays to the end.

    .venv/bin/python benchmarks/search_economy.py [--grid embedding|rerank] [--documents 1000] [--datasets demo scifact]
        [--reranker NAME] [--strategies race stagewise stagewise+race] [--queries N]
    .venv/bin/python benchmarks/search_economy.py --tiny     # a check that it runs (demo, 20 questions)
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from bench_io import write_json
from kbench import format_table
from kbench.sweep import expand_sweep
from kbench.sweep.scoring import ConfigScorer
from kbench.sweep.search_outcome import compare_frames, recommend
from kbench.sweep.search_run import run_search

CHUNKINGS = [
    {"strategy": "none"},
    {"strategy": "fixed", "chunk_size": 1000, "chunk_overlap": 200},
    {"strategy": "fixed", "chunk_size": 500, "chunk_overlap": 100},
    {"strategy": "recursive", "chunk_size": 1000, "chunk_overlap": 200},
]
LEGS = [["vector", "bm25"], ["vector"], ["bm25"]]
EMBEDDING_GRID = {"chunking": CHUNKINGS, "embedding.model": ["all-MiniLM-L6-v2", "all-mpnet-base-v2"],
                  "retrieval.legs": LEGS, "retrieval.fusion.k": [10, 60]}


def rerank_grid(model: str) -> dict:
    """One embedder; rerank off or a cross-encoder over the top 10, 20 or 30 (top_k 10 x candidate_multiplier),
    128 tokens per pair, OpenVINO (bf16) as the benchmarks' rerank page recommends."""
    reranks = [{"enabled": False}] + [
        {"enabled": True, "strategy": "cross_encoder", "model": model, "candidate_multiplier": m, "max_length": 128,
         "backend": "openvino"} for m in (1, 2, 3)]
    return {"chunking": CHUNKINGS[:2], "retrieval.legs": LEGS, "retrieval.fusion.k": [10, 60], "rerank": reranks}


def sweep_data(dataset: dict, workspace: Path, search: dict | None, grid: dict) -> dict:
    data = {
        "name": f"search-economy-{dataset['name']}", "workspace": str(workspace), "dataset": dataset,
        "chunking": CHUNKINGS[1],
        "embedding": {"model": "all-MiniLM-L6-v2", "batch_size": 64},
        "retrieval": {"legs": ["vector", "bm25"], "fusion": {"strategy": "rrf", "k": 60}, "top_k": 10,
                      "latency": "batch"},
        "evaluation": {"k": [10]},
        "tracking": {"enabled": False},
        "sweep": grid,
    }
    if search:
        data["search"] = search
    return data


@contextmanager
def fresh_workspace(prefix: str):
    """A temporary workspace with empty caches; KBENCH_WORKSPACE (which wins over a config's workspace) points
    at it while the strategy runs, so no strategy reads another's embeddings."""
    before = os.environ.get("KBENCH_WORKSPACE")
    with tempfile.TemporaryDirectory(prefix=prefix) as folder:
        os.environ["KBENCH_WORKSPACE"] = folder
        try:
            yield Path(folder)
        finally:
            if before is None:
                os.environ.pop("KBENCH_WORKSPACE", None)
            else:
                os.environ["KBENCH_WORKSPACE"] = before


def full_grid(dataset: dict, workspace: Path, grid: dict) -> dict:
    plan = expand_sweep(sweep_data(dataset, workspace, None, grid))
    scorer = ConfigScorer(plan)
    try:
        ids = scorer.question_ids()
        frames, left = {}, [c.label for c in plan.configs]
        for group in dict.fromkeys(scorer.group[label] for label in left):  # one corpus held at a time
            members = [label for label in left if scorer.group[label] == group]
            frames.update(scorer.score(members, ids))
            left = [label for label in left if label not in members]
            scorer.release(left)
    finally:
        scorer.close()
    headline = "chunk_ndcg_at_10" if "chunk_ndcg_at_10" in next(iter(frames.values())) else "doc_ndcg_at_10"
    comparison = compare_frames(frames, headline, plan, scorer.costs)
    best, _ = recommend(comparison, frames, headline, plan.baseline.recommend)
    ranking = comparison.ranking()  # the top tie: the best by mean and every config not significantly worse
    top_tie = {best, *ranking[ranking["vs_best"] != "worse"]["config"]}
    return {"configs": len(plan.configs), "cost": scorer.cost, "recommended": best, "top_tie": top_tie,
            "headline": headline, "means": {k: float(v[headline].mean()) for k, v in frames.items()}}


def searched(dataset: dict, workspace: Path, search: dict, grid: dict) -> dict:
    plan = expand_sweep(sweep_data(dataset, workspace, search, grid))
    outcome = run_search(plan, say=progress, log=False)
    return {"cost": outcome.cost, "recommended": outcome.recommended, "notes": outcome.notes,
            "steps": outcome.steps, "dropped": len(outcome.dropped())}


def progress(line: str) -> None:
    """What a search says as it goes, on stderr with the time (the table on stdout is the result)."""
    print(f"{time.strftime('%H:%M:%S')} {line}", file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=1000, help="SciFact documents (judged ones always kept)")
    parser.add_argument("--datasets", nargs="+", default=["demo", "scifact"], choices=["demo", "scifact"])
    parser.add_argument("--grid", default="embedding", choices=["embedding", "rerank"],
                        help="embedding: 4 chunkings x 2 embedders x 3 modes x 2 RRF k; rerank: 2 chunkings x 3 "
                             "modes x 2 RRF k x rerank off / top 10, 20, 30")
    parser.add_argument("--reranker", default="scifact-minilm-ce",
                        help="--grid rerank: a trained cross-encoder (kbench models train-reranker --out NAME)")
    parser.add_argument("--strategies", nargs="+", default=["race", "stagewise", "stagewise+race"],
                        choices=["race", "stagewise", "stagewise+race"], help="searches beside the full grid")
    parser.add_argument("--queries", type=int, default=None, help="a seeded sample of this many questions "
                                                                    "(default: all)")
    parser.add_argument("--tiny", action="store_true", help="demo set, 20 questions: only checks that it runs")
    args = parser.parse_args()
    grid = EMBEDDING_GRID if args.grid == "embedding" else rerank_grid(args.reranker)
    order = ["chunking", "embedding", "retrieval", "rerank"]
    datasets = {"demo": {"name": "demo"},
                "scifact": {"name": "scifact", "split": "test", "max_documents": args.documents}}
    if args.queries:  # a seeded sample of the questions, on both sets
        datasets = {name: {**d, "max_queries": args.queries, "seed": 0} for name, d in datasets.items()}
    if args.tiny:
        datasets = {"demo": {"name": "demo", "max_queries": 20, "max_documents": 1, "seed": 1}}
    strategies = {"race": {"strategy": "race", "alpha": 0.05},
                  "stagewise": {"strategy": "stagewise", "order": order},
                  "stagewise+race": {"strategy": "stagewise", "order": order, "race": True, "alpha": 0.05}}
    rows, results = [], {}
    for name, dataset in datasets.items():
        if name not in args.datasets and not args.tiny:
            continue
        progress(f"{name}: full grid (load average {os.getloadavg()[0]:.2f})")
        with fresh_workspace("kbench-search-full-") as folder:
            full = full_grid(dataset, folder, grid)
        runs = {"full": {"cost": full["cost"], "recommended": full["recommended"], "notes": [], "steps": [],
                         "dropped": 0}}
        for strategy, search in [(k, v) for k, v in strategies.items() if k in args.strategies]:
            progress(f"{name}: {strategy} (load average {os.getloadavg()[0]:.2f})")
            with fresh_workspace(f"kbench-search-{strategy.replace('+', '-')}-") as folder:
                runs[strategy] = searched(dataset, folder, search, grid)
        base = full["cost"].compute_seconds or float("nan")
        for strategy, run in runs.items():
            c = run["cost"]
            rows.append([name, strategy, c.configs_scored, run["dropped"], f"{c.groups_embedded} ({c.configs_embedded})",
                         c.scorings,
                         f"{c.embed_seconds:.1f}", f"{c.search_seconds:.1f}", f"{c.compute_seconds:.1f}",
                         f"{c.compute_seconds / base:.3f}", run["recommended"],
                         f"{full['means'][run['recommended']]:.4f}",
                         "yes" if run["recommended"] in full["top_tie"] else "no"])
            results[f"{name}/{strategy}"] = {**c.as_dict(), "recommended": run["recommended"],
                                             "in_full_top_tie": run["recommended"] in full["top_tie"],
                                             "recommended_mean": full["means"][run["recommended"]],
                                             "compute_ratio_to_full": c.compute_seconds / base,
                                             "notes": run["notes"], "steps": run["steps"],
                                             "dropped": run["dropped"]}
        results[f"{name}/full"].update(top_tie=sorted(full["top_tie"]), means=full["means"])
    print(format_table(["dataset", "strategy", "configs scored", "dropped", "corpora embedded (configs)", "scorings",
                        "embed s", "search s", "compute s", "vs full", "recommended", "its headline mean",
                        "in full top tie"], rows))
    print("compute s = embedding + search seconds (reranking included; model loading and chunking not counted); "
          f"each strategy in a fresh workspace, so each embeds every corpus it needs; load average at the end "
          f"{os.getloadavg()[0]:.2f}")
    write_json(f"search_economy_{args.grid}", {"grid": args.grid, "axes": grid, "datasets": list(datasets),
                                               "results": results})


if __name__ == "__main__":
    main()
