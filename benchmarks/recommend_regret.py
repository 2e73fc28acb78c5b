"""How often does a recommendation ship a config worse than the best? The tie rule against the margin rule.

On every set with real labels that ships (the demo set, SciFact's claims, Chroma's chunking set; CoSQA does not
ship), one grid of 8 configs (2 chunkers x 4 retrieval modes: vector, BM25, RRF and weighted 0.5 fusion, all
all-MiniLM-L6-v2, as ``benchmarks/synthetic_agreement.py``) runs once on the whole set, exactly as ``kbench run``
would (nothing logged), timed per question (``retrieval.latency: per_query``, so the old rule's latency guard
reads real per-question latency). Each config keeps its per-question scores, latency and ``cost_index_bytes``.
Then, for each n in ``--sizes`` (15, 30, 60, 120), ``--draws`` seeded samples of n questions (without
replacement; n above the set's size is reported as n/a), and on each draw both rules recommend from the draw's
questions only:

- **old**: the rule kbench shipped before issue 40, reproduced here (and only here): the cheapest config
  (``cost_index_bytes``, then p95 latency) in the top tie on the headline and every default guard (doc and
  chunk nDCG@10, recall@10, p95 latency); a quality tie is the best and every config not significantly worse
  (paired randomization test, 10,000 sign flips, Holm, alpha 0.05), the latency tie every config whose paired
  bootstrap interval of the p95 difference reaches 1 ms. No config in every tie: "none", counted as cannot
  decide; its regret is that of the best by mean on the draw (what a search fell back to and winner.yaml held).
- **new**: ``kbench.evaluation.recommend`` with its defaults (margin 0.01, the same quality guards,
  ``cost_index_bytes``, no budget): the best by mean unless a cheaper config is shown within the margin;
  "cannot decide" when the pick is not shown within the margin of every other config (it is then provisional,
  and its regret counts all the same).

Regret of a draw: the whole set's headline mean of the whole set's best config minus the whole set's headline
mean of the config recommended on the draw (a provisional or fallback pick counts). Per set, n and rule: mean
regret, the share of draws with regret above the margin, the share that cannot decide, the share of all draws
that decided and have regret above the margin (a claim the whole set refutes), the share with regret above the
margin among the draws the rule decided (n/a when it decided none) and the config picked most often.

    .venv/bin/python benchmarks/recommend_regret.py [--datasets demo,scifact,chroma_chunking] [--draws 200]
        [--sizes 15,30,60,120] [--workspace experiments] [--json out.json] [--grid-cache DIR]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from kbench import DatasetConfig, load_dataset, run_pipeline
from kbench.config import validate_experiment
from kbench.evaluation.recommend import ConfigRecord, RecommendConfig, recommend
from kbench.evaluation.significance import rank_against_best

from bench_io import CHUNKERS, MODES

MARGIN = 0.01
ALPHA = 0.05


# --------------------------------------------------------------------------- the grid, once per set
def run_grid(dataset: dict, workspace: Path) -> list[ConfigRecord]:
    """Each config of the grid on the whole set: per-question numeric columns (questions sorted by id) and
    its cost_index_bytes."""
    out = []
    for chunker, chunking in CHUNKERS.items():
        for mode, retrieval in MODES.items():
            experiment = validate_experiment({
                "name": "recommend-regret", "workspace": str(workspace), "dataset": dataset, "chunking": chunking,
                "embedding": {"model": "all-MiniLM-L6-v2"},
                "retrieval": {**retrieval, "top_k": 20, "candidates_per_leg": 50, "latency": "per_query"},
                "evaluation": {"k": [10]}, "tracking": {"experiment": "recommend-regret"}})
            result = run_pipeline(experiment, progress=False)
            frame = result.per_query.set_index("query_id").sort_index()
            columns = {c: frame[c].to_numpy(dtype=float) for c in frame.columns if frame[c].dtype.kind in "fi"}
            out.append(ConfigRecord(f"{chunker}/{mode}", columns,
                                    {"cost_index_bytes": float(result.metrics["cost_index_bytes"])}))
    return out


def cached_grid(dataset: dict, workspace: Path, cache: Path | None, name: str) -> list[ConfigRecord]:
    """The grid's records, read from ``cache/<name>.json`` when an earlier run wrote them (the draws are then
    redone without running the grid again), else run and written there."""
    file = cache / f"{name}.json" if cache else None
    if file is not None and file.is_file():
        data = json.loads(file.read_text(encoding="utf-8"))
        if data["dataset"] == dataset:
            return [ConfigRecord(r["label"], {k: np.asarray(v, dtype=float) for k, v in r["per_query"].items()},
                                 r["values"]) for r in data["records"]]
    records = run_grid(dataset, workspace)
    if file is not None:
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(json.dumps({"dataset": dataset, "records": [
            {"label": r.label, "per_query": {k: v.tolist() for k, v in r.per_query.items()}, "values": r.values}
            for r in records]}), encoding="utf-8")
    return records


def dataset_config(name: str, scifact_documents: int, chroma_subset: str) -> dict:
    """A shipped set's dataset section as the benchmarks read it: SciFact's judged abstracts plus a seeded sample to
    ``scifact_documents``, Chroma's corpora of ``chroma_subset`` ('' = all five)."""
    config: dict = {"name": name}
    if name == "scifact":
        config["max_documents"] = scifact_documents
    if name == "chroma_chunking" and chroma_subset:
        config["subset"] = chroma_subset.split(",")
    return config


def subset(records: list[ConfigRecord], rows: np.ndarray) -> list[ConfigRecord]:
    return [ConfigRecord(r.label, {k: v[rows] for k, v in r.per_query.items()}, r.values) for r in records]


# --------------------------------------------------------------------------- the old rule, kept only here
OLD_GUARDS = ["doc_ndcg_at_10", "chunk_ndcg_at_10", "recall_at_10", "latency_ms_total_p95"]
LATENCY = re.compile(r"^latency_ms_(?P<stage>\w+?)_p(?P<q>\d{1,2})$")
LEVELS = ("chunk", "doc", "span")


def old_metrics(headline: str, guards: list[str]) -> list[str]:
    level = headline.split("_", 1)[0] if headline.split("_", 1)[0] in LEVELS else None
    out = [headline]
    for guard in guards:
        name = guard
        if level and not LATENCY.match(guard) and guard.split("_", 1)[0] not in LEVELS:
            name = f"{level}_{guard}"
        if name not in out:
            out.append(name)
    return out


def old_latency_tie(column: str, q: float, records: list[ConfigRecord], *, alpha: float, n_bootstrap: int,
                    seed: int, tolerance_ms: float) -> list[str]:
    arrays = {r.label: np.asarray(r.per_query[column], dtype=float) for r in records}
    values = {label: float(np.percentile(a, q)) for label, a in arrays.items()}
    order = sorted(values, key=lambda label: values[label])
    fastest = arrays[order[0]]
    n = len(fastest)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_bootstrap, n))
    base = np.percentile(fastest[idx], q, axis=1)
    level = 1 - alpha / max(len(order) - 1, 1)
    tie = [order[0]]
    for label in order[1:]:
        differences = np.percentile(arrays[label][idx], q, axis=1) - base
        low = float(np.percentile(differences, 100 * (1 - level) / 2))
        if low <= tolerance_ms:
            tie.append(label)
    return tie


def old_recommend(records: list[ConfigRecord], headline: str, *, cost: str = "cost_index_bytes",
                  tolerance_ms: float = 1.0, alpha: float = ALPHA, n_resamples: int = 10_000,
                  n_bootstrap: int = 2_000, seed: int = 0) -> str | None:
    """kbench's recommendation before issue 40 (kbench/evaluation/recommend.py at c656d87), with its defaults:
    the cheapest config in the top tie on every metric, or None when no config is in every tie."""
    ties = {}
    for metric in old_metrics(headline, OLD_GUARDS):
        latency = LATENCY.match(metric)
        column = f"latency_ms_{latency['stage']}" if latency else metric
        if any(column not in r.per_query for r in records):
            continue  # a guard these runs do not measure is left out
        if latency:
            ties[metric] = old_latency_tie(column, float(latency["q"]), records, alpha=alpha,
                                           n_bootstrap=n_bootstrap, seed=seed, tolerance_ms=tolerance_ms)
        else:
            ranked = rank_against_best({r.label: r.per_query[metric] for r in records}, test="randomization",
                                       correction="holm", alpha=alpha, n_resamples=n_resamples, seed=seed)
            ties[metric] = [v.label for v in ranked if v.verdict != "worse"]
    costs = {r.label: float(r.values.get(cost, math.nan)) for r in records}
    latency = {r.label: float(np.percentile(r.per_query["latency_ms_total"], 95)) for r in records}
    order = ties[headline] + [r.label for r in records if r.label not in ties[headline]]
    in_every = [c for c in order if all(c in tie for tie in ties.values())]
    if not in_every:
        return None
    rank = {label: i for i, label in enumerate(order)}
    return min(in_every, key=lambda c: tuple(math.inf if math.isnan(x) else x
                                             for x in (costs[c], latency[c])) + (rank[c],))


# --------------------------------------------------------------------------- the draws
def draw_outcomes(records: list[ConfigRecord], headline: str, n: int, draws: int, seed: int) -> dict:
    full = {r.label: float(np.mean(r.per_query[headline])) for r in records}
    best_full = max(full.values())
    total = len(records[0].per_query[headline])
    rng = np.random.default_rng([seed, n])
    out = {"old": [], "new": []}
    for _ in range(draws):
        rows = np.sort(rng.choice(total, size=n, replace=False))
        sample = subset(records, rows)
        by_mean = max(sample, key=lambda r: float(np.mean(r.per_query[headline]))).label
        old = old_recommend(sample, headline)
        out["old"].append({"config": old or by_mean, "decided": old is not None,
                           "regret": best_full - full[old or by_mean]})
        found = recommend(sample, headline, RecommendConfig(margin=MARGIN))
        out["new"].append({"config": found.config, "decided": found.decided,
                           "regret": best_full - full[found.config]})
    return out


def summarize(outcomes: list[dict]) -> dict:
    regret = np.array([o["regret"] for o in outcomes])
    decided = np.array([o["decided"] for o in outcomes])
    over = regret > MARGIN + 1e-12
    picks = Counter(o["config"] for o in outcomes).most_common(1)[0]
    return {"draws": len(outcomes), "mean_regret": float(regret.mean()), "over_margin": float(over.mean()),
            "cannot_decide": float(1 - decided.mean()), "decided": int(decided.sum()),
            "decided_and_over_margin": float((over & decided).mean()),
            "over_margin_when_decided": float(over[decided].mean()) if decided.any() else None,
            "most_picked": picks[0], "most_picked_share": picks[1] / len(outcomes)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="demo,scifact,chroma_chunking")
    parser.add_argument("--sizes", default="15,30,60,120")
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--scifact-documents", type=int, default=1000,
                        help="SciFact: its judged abstracts plus a seeded sample up to this many")
    parser.add_argument("--chroma-subset", default="chatlogs,state_of_the_union,wikitexts",
                        help="Chroma corpora to use ('' = all five; finance and pubmed are 1.2 MB of the 1.45)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workspace", default="experiments", help="its cache/ keeps embeddings between runs")
    parser.add_argument("--json", help="also write every figure here")
    parser.add_argument("--grid-cache", metavar="DIR",
                        help="keep each set's grid results here and reuse them (the draws run again, the grid not)")
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",") if x]
    workspace = Path(args.workspace).resolve()
    started = time.perf_counter()
    figures, rows = {}, []
    for name in [d for d in args.datasets.split(",") if d]:
        config = dataset_config(name, args.scifact_documents, args.chroma_subset)
        dataset = load_dataset(DatasetConfig(**config))
        level = "chunk" if dataset.spans else "doc"
        headline = f"{level}_ndcg_at_10"
        print(f"{name}: {len(dataset.queries)} questions, headline {headline}; running the grid", file=sys.stderr,
              flush=True)
        records = cached_grid(config, workspace, Path(args.grid_cache) if args.grid_cache else None, name)
        full = {r.label: float(np.mean(r.per_query[headline])) for r in records}
        figures[name] = {"questions": len(dataset.queries), "headline": headline, "means": full,
                         "costs": {r.label: r.values["cost_index_bytes"] for r in records},
                         "p95_ms": {r.label: float(np.percentile(r.per_query["latency_ms_total"], 95))
                                    for r in records},
                         "full_set": recommend(records, headline, RecommendConfig(margin=MARGIN)).as_dict(),
                         "sizes": {}}
        for n in sizes:
            if n > len(dataset.queries):
                figures[name]["sizes"][n] = None
                rows.append([name, str(n), "-", "both", "n/a", "n/a", "n/a", "n/a", "n/a", "-"])
                continue
            outcomes = draw_outcomes(records, headline, n, args.draws, args.seed)
            figures[name]["sizes"][n] = {rule: summarize(o) for rule, o in outcomes.items()}
            for rule in ("old", "new"):
                s = figures[name]["sizes"][n][rule]
                when = "n/a" if s["over_margin_when_decided"] is None else \
                    f"{s['over_margin_when_decided']:.3f} ({s['decided']})"
                rows.append([name, str(n), str(s["draws"]), rule, f"{s['mean_regret']:.4f}", f"{s['over_margin']:.3f}",
                             f"{s['cannot_decide']:.3f}", f"{s['decided_and_over_margin']:.3f}", when,
                             f"{s['most_picked']} ({s['most_picked_share']:.2f})"])
            print(f"  n={n}: done ({time.perf_counter() - started:.0f}s)", file=sys.stderr, flush=True)
    headers = ["set", "n", "draws", "rule", "mean regret", "regret > 0.01", "cannot decide",
               "decided and regret > 0.01", "regret > 0.01 when decided (decided draws)", "most picked"]
    print("| " + " | ".join(headers) + " |")
    print("|" + "---|" * len(headers))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    for name, f in figures.items():
        print(f"\n{name} ({f['questions']} questions, {f['headline']}): whole-set means "
              + ", ".join(f"{k} {v:.4f}" for k, v in sorted(f["means"].items(), key=lambda kv: -kv[1])))
        print(f"  whole set, new rule: {f['full_set']['lines'][0]}")
    load = os.getloadavg()
    print(f"\n{time.perf_counter() - started:.0f}s; load average {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
