"""Search economy: a 48-config grid searched in full, by racing and stage by stage, compute side by side.

The grid (4 chunkings x 2 embedders x 3 retrieval modes x 2 RRF k = 48 configs) runs on the demo set and on a
SciFact sample (every judged document plus a seeded sample up to ``--documents``; all 300 test claims). Each
strategy runs in its own fresh workspace (cold caches: every corpus it needs is embedded by it) through the
same ``ConfigScorer``, so the three are counted the same way:

- full: every config scored on every question, compared as a grid sweep compares its children;
- race: ``search: {strategy: race}`` (alpha 0.05, Bonferroni over rounds x comparisons);
- stagewise: ``search: {strategy: stagewise, order: [chunking, embedding, retrieval]}``.

Per strategy: configs scored, corpora embedded (and the configs they serve), config-question scorings,
embedding seconds, search seconds, their sum and its ratio to the full grid's, the recommended config and
whether it is in the full grid's top tie (the best and every config not significantly worse). The done-when
of issue 34: the race's pick in the full grid's top tie at <= 35% of its compute; stage-wise's agreement said.

    .venv/bin/python benchmarks/search_economy.py [--documents 1000] [--datasets demo scifact]
    .venv/bin/python benchmarks/search_economy.py --tiny     # a check that it runs (demo, 20 questions)
"""
from __future__ import annotations

import argparse
import os
import tempfile
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
GRID = {"chunking": CHUNKINGS, "embedding.model": ["all-MiniLM-L6-v2", "all-mpnet-base-v2"],
        "retrieval.legs": [["vector", "bm25"], ["vector"], ["bm25"]], "retrieval.fusion.k": [10, 60]}


def sweep_data(dataset: dict, workspace: Path, search: dict | None) -> dict:
    data = {
        "name": f"search-economy-{dataset['name']}", "workspace": str(workspace), "dataset": dataset,
        "chunking": CHUNKINGS[1],
        "embedding": {"model": "all-MiniLM-L6-v2", "batch_size": 64},
        "retrieval": {"legs": ["vector", "bm25"], "fusion": {"strategy": "rrf", "k": 60}, "top_k": 10,
                      "latency": "batch"},
        "evaluation": {"k": [10]},
        "tracking": {"enabled": False},
        "sweep": GRID,
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


def full_grid(dataset: dict, workspace: Path) -> dict:
    plan = expand_sweep(sweep_data(dataset, workspace, None))
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
    comparison = compare_frames(frames, headline, plan)
    best, tied = recommend(comparison, frames, headline)
    return {"configs": len(plan.configs), "cost": scorer.cost, "recommended": best, "top_tie": {best, *tied},
            "headline": headline, "means": {k: float(v[headline].mean()) for k, v in frames.items()}}


def searched(dataset: dict, workspace: Path, search: dict) -> dict:
    plan = expand_sweep(sweep_data(dataset, workspace, search))
    outcome = run_search(plan, say=lambda line: None, log=False)
    return {"cost": outcome.cost, "recommended": outcome.recommended, "notes": outcome.notes,
            "dropped": len(outcome.race.dropped) if outcome.race else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=1000, help="SciFact documents (judged ones always kept)")
    parser.add_argument("--datasets", nargs="+", default=["demo", "scifact"], choices=["demo", "scifact"])
    parser.add_argument("--tiny", action="store_true", help="demo set, 20 questions: only checks that it runs")
    args = parser.parse_args()
    datasets = {"demo": {"name": "demo"},
                "scifact": {"name": "scifact", "split": "test", "max_documents": args.documents}}
    if args.tiny:
        datasets = {"demo": {"name": "demo", "max_queries": 20, "max_documents": 1, "seed": 1}}
    strategies = {"race": {"strategy": "race", "alpha": 0.05},
                  "stagewise": {"strategy": "stagewise", "order": ["chunking", "embedding", "retrieval"]}}
    rows, results = [], {}
    for name, dataset in datasets.items():
        if name not in args.datasets and not args.tiny:
            continue
        with fresh_workspace("kbench-search-full-") as folder:
            full = full_grid(dataset, folder)
        runs = {"full": {"cost": full["cost"], "recommended": full["recommended"], "notes": [], "dropped": None}}
        for strategy, search in strategies.items():
            with fresh_workspace(f"kbench-search-{strategy}-") as folder:
                runs[strategy] = searched(dataset, folder, search)
        base = full["cost"].compute_seconds or float("nan")
        for strategy, run in runs.items():
            c = run["cost"]
            rows.append([name, strategy, c.configs_scored, f"{c.groups_embedded} ({c.configs_embedded})", c.scorings,
                         f"{c.embed_seconds:.1f}", f"{c.search_seconds:.1f}", f"{c.compute_seconds:.1f}",
                         f"{c.compute_seconds / base:.3f}", run["recommended"],
                         "yes" if run["recommended"] in full["top_tie"] else "no"])
            results[f"{name}/{strategy}"] = {**c.as_dict(), "recommended": run["recommended"],
                                             "in_full_top_tie": run["recommended"] in full["top_tie"],
                                             "compute_ratio_to_full": c.compute_seconds / base,
                                             "notes": run["notes"], "dropped": run["dropped"]}
        results[f"{name}/full"]["top_tie"] = sorted(full["top_tie"])
    print(format_table(["dataset", "strategy", "configs scored", "corpora embedded (configs)", "scorings",
                        "embed s", "search s", "compute s", "vs full", "recommended", "in full top tie"], rows))
    print("compute s = embedding + search seconds (model loading and chunking not counted); each strategy in a "
          "fresh workspace, so each embeds every corpus it needs")
    write_json("search_economy", {"grid_configs": 48, "datasets": list(datasets), "results": results})


if __name__ == "__main__":
    main()
