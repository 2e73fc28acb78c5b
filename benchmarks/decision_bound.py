"""Does a decision hold on real questions? The pick's bound, one pick across sets, and --until-decided.

On every set with real questions that ships (the demo set, SciFact's test claims over its judged abstracts plus a
seeded sample, Chroma's chunking set), the 8-config grid of ``recommend_regret.py`` (fixed 400 / recursive 1000
chunks x vector, BM25, RRF, weighted 0.5; all-MiniLM-L6-v2) runs once on the whole set and once on each set
generated from the same documents (``heading`` where the documents have markdown headings, ``ict``; at most
``--generated`` questions each, seed 0). The whole real set is the truth: regret is the whole set's headline mean of
its best config minus that of the config picked. Then, over ``--draws`` seeded draws of real questions:

(a) **bound coverage**: for n in ``--sizes``, ``kbench.evaluation.recommend`` on n real questions (margin 0.01,
    default guards) states a bound (no config here is better than the pick by more than it, 95%); a *miss* is a
    draw where the whole set's best beats the pick by more than the stated bound. Target: misses <= 5%.
(b) **across sets against one set**: the pick of each generated set alone and of the generated sets together
    (``evaluation.across.recommend_across``), fixed; for each n, the pick of n real questions alone and across the n
    real questions and the generated sets. Regret on the whole real set, share decided, decided with regret above
    the margin.
(c) **--until-decided against fixed n**: the loop of ``kbench.sweep.sequential`` on real questions revealed in a
    seeded order (first look 15 questions, each look doubling them, up to the whole set), against one look at each
    fixed n: questions spent, share decided, regret when decided, misses of the final bound; and the loop with a
    look every 4 questions from 10 (at least 20 looks on every set), whose misses must stay under 5%.

    .venv/bin/python benchmarks/decision_bound.py [--datasets demo,scifact,chroma_chunking] [--draws 200]
        [--sizes 15,30,60,120] [--grid-cache DIR] [--json out.json]

Statistics, not timings: they run under load; the load average is printed beside each table.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

import bench_io  # noqa: F401  (quiets the libraries before any model library is imported)
from kbench import DatasetConfig, load_dataset
from kbench.datasets.synthetic import SyntheticError
from kbench.evaluation.across import recommend_across
from kbench.evaluation.recommend import ConfigRecord, RecommendConfig, recommend
from kbench.sweep.sequential import growing_batches, until_decided
from recommend_regret import cached_grid, dataset_config, subset
from synthetic_agreement import build

MARGIN = 0.01
CONFIG = RecommendConfig(margin=MARGIN)
NAMES = {"demo": "demo", "scifact": "SciFact", "chroma_chunking": "Chroma"}


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f}"


def table(headers: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers), *("| " + " | ".join(r) + " |" for r in rows)]


def truth(records: list[ConfigRecord], headline: str) -> tuple[dict[str, float], float]:
    means = {r.label: float(np.mean(r.per_query[headline])) for r in records}
    return means, max(means.values())


# --------------------------------------------------------------------------- (a) coverage of the bound
def coverage(records, headline: str, n: int, draws: int, seed: int) -> dict:
    means, best = truth(records, headline)
    total = len(records[0].per_query[headline])
    rng = np.random.default_rng([seed, n, 1])
    misses, bounds, decided, regrets = [], [], [], []
    for _ in range(draws):
        found = recommend(subset(records, np.sort(rng.choice(total, n, replace=False))), headline, CONFIG)
        gap = best - means[found.config]
        misses.append(gap > found.bound + 1e-12)
        bounds.append(found.bound)
        decided.append(found.decided)
        regrets.append(gap)
    return {"misses": float(np.mean(misses)), "mean_bound": float(np.mean(bounds)),
            "median_bound": float(np.median(bounds)), "decided": float(np.mean(decided)),
            "mean_regret": float(np.mean(regrets))}


# --------------------------------------------------------------------------- (b) across sets
def pick_stats(picks: list[tuple[str, bool]], means: dict[str, float], best: float) -> dict:
    regret = np.array([best - means[p] for p, _ in picks])
    decided = np.array([d for _, d in picks])
    over = regret > MARGIN + 1e-12
    return {"mean_regret": float(regret.mean()), "over_margin": float(over.mean()), "decided": float(decided.mean()),
            "decided_and_over": float((over & decided).mean()),
            "most_picked": Counter(p for p, _ in picks).most_common(1)[0][0]}


def across_rows(records, generated: dict[str, list[ConfigRecord]], headline: str, sizes: list[int], draws: int,
                seed: int) -> list[dict]:
    means, best = truth(records, headline)
    total = len(records[0].per_query[headline])
    rows = []
    for name, gen in generated.items():
        found = recommend(gen, headline, CONFIG)
        rows.append({"n": "-", "rule": f"{name} alone ({len(gen[0].per_query[headline])} q)",
                     **pick_stats([(found.config, found.decided)], means, best)})
    if len(generated) > 1:
        found = recommend_across(generated, headline, CONFIG)
        rows.append({"n": "-", "rule": f"across {' + '.join(generated)}",
                     **pick_stats([(found.pick, found.decided)], means, best)})
    for n in sizes:
        if n > total:
            continue
        rng = np.random.default_rng([seed, n, 2])
        alone, across = [], []
        for _ in range(draws):
            draw = subset(records, np.sort(rng.choice(total, n, replace=False)))
            found = recommend(draw, headline, CONFIG)
            alone.append((found.config, found.decided))
            together = recommend_across({"real": draw, **generated}, headline, CONFIG)
            across.append((together.pick, together.decided))
        rows.append({"n": str(n), "rule": "real questions alone", **pick_stats(alone, means, best)})
        rows.append({"n": str(n), "rule": f"across real + {' + '.join(generated)}", **pick_stats(across, means, best)})
    return rows


# --------------------------------------------------------------------------- (c) --until-decided
def sequential(records, headline: str, order: np.ndarray, batches_of: list[int]) -> tuple:
    """The loop of kbench.sweep.sequential on ``records`` with questions asked in ``order``, cut at the running
    totals ``batches_of``; returns the final recommendation and the questions spent."""
    by_label = {r.label: r for r in records}
    cuts = [0, *batches_of]
    batches = [list(order[a:b]) for a, b in zip(cuts, cuts[1:])]

    def decide(seen: dict[str, list], level: float, look: int):
        rows = np.concatenate(next(iter(seen.values())))
        return recommend(subset([by_label[c] for c in seen], rows), headline, CONFIG, alpha=level)

    result = until_decided(list(by_label), batches, lambda alive, batch: {c: np.asarray(batch) for c in alive},
                           decide)
    return result.final, result.questions, len(result.looks)


def sequential_rows(records, headline: str, sizes: list[int], draws: int, seed: int) -> list[dict]:
    means, best = truth(records, headline)
    total = len(records[0].per_query[headline])
    rows = []
    plans = {"until decided (15, x2)": list(np.cumsum([len(b) for b in growing_batches(list(range(total)),
                                                                                         first=15)])),
             "until decided (every 4 from 10)": list(range(10, total + 1, 4))[:30]}
    for n in sizes:
        if n > total:
            continue
        rng = np.random.default_rng([seed, n, 3])
        stats = []
        for _ in range(draws):
            found = recommend(subset(records, np.sort(rng.choice(total, n, replace=False))), headline, CONFIG)
            stats.append((found, n, 1))
        rows.append({"rule": f"fixed n = {n}", **outcome_stats(stats, means, best)})
    for name, cuts in plans.items():
        rng = np.random.default_rng([seed, 4])
        stats = [sequential(records, headline, rng.permutation(total), cuts) for _ in range(draws)]
        rows.append({"rule": f"{name}, looks at {cuts[0]}..{cuts[-1]} ({len(cuts)} planned)",
                     **outcome_stats(stats, means, best)})
    return rows


def outcome_stats(stats: list[tuple], means: dict[str, float], best: float) -> dict:
    regret = np.array([best - means[f.config] for f, _, _ in stats])
    decided = np.array([f.decided for f, _, _ in stats])
    misses = np.array([best - means[f.config] > f.bound + 1e-12 for f, _, _ in stats])
    return {"questions": float(np.mean([q for _, q, _ in stats])), "looks": float(np.mean([k for _, _, k in stats])),
            "max_looks": int(max(k for _, _, k in stats)), "decided": float(decided.mean()),
            "regret_when_decided": float(regret[decided].mean()) if decided.any() else math.nan,
            "over_margin_when_decided": float((regret[decided] > MARGIN + 1e-12).mean()) if decided.any() else math.nan,
            "misses": float(misses.mean()), "mean_regret": float(regret.mean())}


def fmt(x: float, digits: int = 3) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="demo,scifact,chroma_chunking")
    parser.add_argument("--sizes", default="15,30,60,120")
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--methods", default="heading,ict", help="the generated sets of (b)")
    parser.add_argument("--generated", type=int, default=200, help="questions per generated set (at most)")
    parser.add_argument("--scifact-documents", type=int, default=1000)
    parser.add_argument("--chroma-subset", default="chatlogs,state_of_the_union,wikitexts")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workspace", default="experiments", help="its cache/ keeps embeddings between runs")
    parser.add_argument("--grid-cache", metavar="DIR", help="keep each grid's results here and reuse them")
    parser.add_argument("--json", help="also write every figure here")
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",") if x]
    workspace = Path(args.workspace).resolve()
    cache = Path(args.grid_cache).resolve() if args.grid_cache else None
    sets_root = (cache or workspace / "bench") / "generated-sets"
    started = time.perf_counter()
    figures: dict = {}
    for name in [d for d in args.datasets.split(",") if d]:
        config = dataset_config(name, args.scifact_documents, args.chroma_subset)
        dataset = load_dataset(DatasetConfig(**config))
        headline = f"{'chunk' if dataset.spans else 'doc'}_ndcg_at_10"
        print(f"{name}: {len(dataset.queries)} questions, {len(dataset.documents)} documents; the grid", file=sys.stderr,
              flush=True)
        records = cached_grid(config, workspace, cache, name)
        generated = {}
        for method in [m for m in args.methods.split(",") if m]:
            out = sets_root / f"{name}-{method}"
            if not (out / "manifest.json").is_file():
                try:
                    build(dataset.documents, out, method, args.generated, args.seed)
                except SyntheticError as e:
                    print(f"  {method}: {e}", file=sys.stderr)
                    continue
            print(f"  {method} set: the grid", file=sys.stderr, flush=True)
            generated[method] = cached_grid({"path": str(out)}, workspace, cache, f"{name}-{method}")
        figures[name] = {"questions": len(dataset.queries), "headline": headline,
                         "means": truth(records, headline)[0], "coverage": {}, "generated": list(generated)}
        print(f"  (a) coverage ({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
        figures[name]["coverage"] = {n: coverage(records, headline, n, args.draws, args.seed) for n in sizes
                                     if n <= len(dataset.queries)}
        figures[name]["coverage_load"] = load()
        print(f"  (b) across ({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
        figures[name]["across"] = across_rows(records, generated, headline, sizes[:3], args.draws, args.seed)
        figures[name]["across_load"] = load()
        print(f"  (c) until decided ({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
        figures[name]["sequential"] = sequential_rows(records, headline, sizes, args.draws, args.seed)
        figures[name]["sequential_load"] = load()

    print(f"\n(a) The bound's coverage: a miss is a draw where the whole set's best beats the pick by more than the "
          f"stated bound (95%; target: at most 5% of draws); {args.draws} draws per n")
    rows = []
    for name, f in figures.items():
        for n, c in f["coverage"].items():
            rows.append([NAMES.get(name, name), str(n), fmt(c["misses"]), fmt(c["mean_bound"], 4),
                         fmt(c["median_bound"], 4), fmt(c["decided"]), fmt(c["mean_regret"], 4)])
    print("\n".join(table(["set", "n", "misses", "mean bound", "median bound", "decided", "mean regret"], rows)))
    print("(" + "; ".join(f"{NAMES.get(k, k)}: {f['coverage_load']}" for k, f in figures.items()) + ")")

    print(f"\n(b) One pick across sets against one set: regret on the whole real set; generated sets from the same "
          f"documents, at most {args.generated} questions each")
    rows = []
    for name, f in figures.items():
        for r in f["across"]:
            rows.append([NAMES.get(name, name), r["n"], r["rule"], fmt(r["mean_regret"], 4), fmt(r["over_margin"]),
                         fmt(r["decided"]), fmt(r["decided_and_over"]), r["most_picked"]])
    print("\n".join(table(["set", "n", "pick", "mean regret", "regret > 0.01", "decided", "decided and regret > 0.01",
                           "most picked"], rows)))
    print("(" + "; ".join(f"{NAMES.get(k, k)}: {f['across_load']}" for k, f in figures.items()) + ")")

    print(f"\n(c) --until-decided against fixed n: questions in a seeded order; {args.draws} draws")
    rows = []
    for name, f in figures.items():
        for r in f["sequential"]:
            rows.append([NAMES.get(name, name), r["rule"], fmt(r["questions"], 1), f"{r['looks']:.1f} ({r['max_looks']})",
                         fmt(r["decided"]), fmt(r["regret_when_decided"], 4), fmt(r["over_margin_when_decided"]),
                         fmt(r["misses"])])
    print("\n".join(table(["set", "rule", "questions spent", "looks (most)", "decided", "regret when decided",
                           "regret > 0.01 when decided", "bound misses"], rows)))
    print("(" + "; ".join(f"{NAMES.get(k, k)}: {f['sequential_load']}" for k, f in figures.items()) + ")")

    for name, f in figures.items():
        print(f"\n{name} ({f['questions']} questions, {f['headline']}): whole-set means "
              + ", ".join(f"{k} {v:.4f}" for k, v in sorted(f["means"].items(), key=lambda kv: -kv[1])))
    print(f"\n{time.perf_counter() - started:.0f}s; {load()}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2, default=float), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
