"""Real questions against generated ones, and a judge worth its labels (issue 54, item 6). Statistics, not timings:
each table prints the load average (1, 5, 15 minutes) beside it.

``match`` (6a): on each shipped set with real questions (the demo set's hand-written questions, SciFact's claims,
Chroma's questions), the real questions play the query log. ``kbench datasets match``'s measure
(``evalsets.match.match_questions``: a logistic regression on MiniLM embeddings, 5-fold AUC with DeLong's interval)
of the real questions against their own two halves (about 0.5) and against each generator's set built from the same
documents (``ict``, ``heading``; as many questions as the real set, seed 0), beside each generator's Kendall tau
with the real questions' ranking of the 8-config grid of benchmarks/synthetic_agreement.py (2 chunkers x 4
retrieval modes, nDCG@10 at the finest level both sets judge at). Does "closer to the log" mean "ranks like the
log"? The datasets are sampled as synthetic_agreement.py samples them (SciFact: its judged abstracts and a seeded
sample to 1,000; Chroma: chatlogs, state_of_the_union and wikitexts).

``judges`` (6b): SciFact's 300 test claims, the top 10 of two configs (BM25 and MiniLM vectors over whole abstracts:
the top two of a sweep, nDCG@10 0.66 against 0.64) pooled; SciFact's qrels play the person (1 relevant, 0 every
other pooled abstract). Three ways to estimate the two configs' difference of pooled nDCG@10 from ``n`` = 50, 100,
200 labelled questions (a seeded random sample, ``--draws`` draws each): humans alone (the labelled questions' mean
difference), PPI++ with a trained judge's grades on every question (a MiniLM cross-encoder, ``kbench judge
--train``, trained on an ``ict`` set built from 1,000 SciFact abstracts with hard negatives from the same two
configs' pools: ``--max-pairs`` pairs, ``--epochs``), and the served SmolLM2 (``kbench serve``): its kappa on a
seeded balanced sample of ``--served-pairs`` pooled pairs (grading the whole pool of about 5,000 pairs takes it
hours on this machine: no PPI++ interval is given for it, and the line says why and how long). Reported:
Cohen's kappa against the qrels on one scale (a judge's grade >= 2 relevant), the mean width of the 95% interval of
the difference, PPI++'s mean lambda, and how often each interval covered the full-set truth.

    .venv/bin/python benchmarks/query_logs.py match [--datasets demo,scifact,chroma_chunking] [--json out.json]
    .venv/bin/python benchmarks/query_logs.py judges [--draws 200] [--max-pairs 400] [--served-pairs 60]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench_io import CHUNKERS, MODES  # noqa: F401  (quiets the libraries first)
from kbench import DatasetConfig, load_dataset, run_pipeline
from kbench.config import validate_experiment
from kbench.datasets.synthetic import SyntheticError
from kbench.evaluation.agreement import kendall_tau
from kbench.evaluation.pooled import pooled_ndcg
from kbench.evaluation.ppi import classical_mean, ppi_difference
from kbench.evalsets.match import match_questions, question_set
from kbench.judging.agreement import cohen_kappa
from kbench.judging.judge import LLMJudge, Pair
from kbench.judging.trained import TrainedJudge, training_pairs
from kbench.training.judge import JudgeTrainingConfig, train_judge

K = 10


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# --------------------------------------------------------------------------- 6a
def match_part(args) -> int:
    from synthetic_agreement import build, run_grid

    workspace = Path(args.workspace).resolve()
    rows, figures = [], {}
    with tempfile.TemporaryDirectory(prefix="query-logs-") as tmp:
        for name in args.datasets.split(","):
            config = {"name": name}
            if name == "scifact":
                config["max_documents"] = args.scifact_documents
            if name == "chroma_chunking":
                config["subset"] = args.chroma_subset.split(",")
            real = load_dataset(DatasetConfig(**config))
            level = "doc" if not real.spans else "chunk"
            real_scores = run_grid(config, workspace, level)
            labels = list(real_scores)
            real_means = np.array([real_scores[k].mean() for k in labels])
            generated = []
            for method in args.methods.split(","):
                out = Path(tmp) / f"{name}-{method}"
                try:
                    report = build(real.documents, out, method, len(real.queries), args.seed)
                except SyntheticError as e:
                    rows.append((name, method, 0, "n/a", "n/a", str(e)[:60]))
                    continue
                scores = run_grid({"path": str(out)}, workspace, level)
                tau = kendall_tau(real_means, np.array([scores[k].mean() for k in labels]))
                generated.append((method, report.kept, tau,
                                  question_set(load_dataset(DatasetConfig(path=str(out))), "set", str(out), method)))
            log = question_set(real, "log")
            found = match_questions(log, [g[3] for g in generated], workspace, seed=args.seed)
            rows.append((name, "real (halves)", len(real.queries), found.halves.text(), "-", f"load {load()}"))
            figures[name] = {"questions": len(real.queries), "level": level, "halves": vars(found.halves), "sets": {}}
            for (method, kept, tau, _), matched in zip(generated, found.sets):
                p = matched.profile
                rows.append((name, method, kept, matched.auc.text(), f"{tau:+.3f}",
                             f"words {p.words[0]:.0f}, question {p.forms['question']:.0%}, keywords "
                             f"{p.forms['keywords only']:.0%}, overlap {p.overlap:.2f}"))
                figures[name]["sets"][method] = {"auc": vars(matched.auc), "tau": tau, "questions": kept,
                                                 "profile": vars(p)}
            rp = found.log_profile
            figures[name]["real_profile"] = vars(rp)
            print(f"done {name} (load {load()})", file=sys.stderr, flush=True)
    print(f"\nload average (1, 5, 15 min) at the end: {load()}")
    print(f"{'dataset':16s} {'set':14s} {'questions':>9s}  {'AUC against the real questions':30s} {'tau':>7s}  notes")
    for name, kind, n, auc, tau, notes in rows:
        print(f"{name:16s} {kind:14s} {n:9d}  {auc:30s} {tau:>7s}  {notes}")
    for name, f in figures.items():
        rp = f["real_profile"]
        print(f"  {name} real questions: words {rp['words'][0]:.0f}, question {rp['forms']['question']:.0%}, "
              f"keywords {rp['forms']['keywords only']:.0%}, overlap {rp['overlap']:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2, default=str))
    return 0


# --------------------------------------------------------------------------- 6b
def scifact_runs(dataset: dict, workspace: Path) -> dict[str, object]:
    """The two configs' results on ``dataset`` (whole abstracts, top 10)."""
    out = {}
    for name, legs in (("bm25", ["bm25"]), ("vector", ["vector"])):
        experiment = validate_experiment({
            "name": f"judges-{name}", "workspace": str(workspace), "dataset": dataset,
            "chunking": {"strategy": "none"}, "embedding": {"model": "all-MiniLM-L6-v2"},
            "retrieval": {"legs": legs, "top_k": K, "latency": "batch"}, "evaluation": {"k": [K]},
            "tracking": {"experiment": "query-logs-bench"}})
        out[name] = run_pipeline(experiment, progress=False)
    return out


def pooled(results: dict) -> tuple[list[str], list[tuple[Pair, str]], np.ndarray, np.ndarray, dict]:
    """(question ids, pairs with their text, question of each pair, ranks [configs, pairs], questions' text)."""
    first = next(iter(results.values()))
    questions = {q.query_id: q.text for q in first.dataset.queries}
    qids = sorted(questions)
    index: dict[Pair, int] = {}
    pairs: list[tuple[Pair, str]] = []
    for result in results.values():
        chunks = {c.chunk_id: c for c in result.chunks}
        for q in qids:
            for h in result.run.hits.get(q, [])[:K]:
                c = chunks[h.chunk_id]
                p = Pair(q, c.doc_id, c.start, c.end)
                if p not in index:
                    index[p] = len(pairs)
                    pairs.append((p, c.text))
    ranks = np.zeros((len(results), len(pairs)), dtype=int)
    for ci, result in enumerate(results.values()):
        chunks = {c.chunk_id: c for c in result.chunks}
        for q in qids:
            for rank, h in enumerate(result.run.hits.get(q, [])[:K], start=1):
                c = chunks[h.chunk_id]
                ranks[ci, index[Pair(q, c.doc_id, c.start, c.end)]] = rank
    position = {q: i for i, q in enumerate(qids)}
    question_of = np.array([position[p.query_id] for p, _ in pairs])
    return qids, pairs, question_of, ranks, questions


def served_sample(pairs, human, questions, n: int, seed: int, workspace: Path, timeout_s: float):
    """SmolLM2's grades (None: unreadable) of a seeded balanced sample of pooled pairs, through kbench serve."""
    from kbench import llm

    rng = np.random.default_rng(seed)
    relevant, other = np.flatnonzero(human > 0), np.flatnonzero(human == 0)
    chosen = np.concatenate([rng.choice(relevant, min(n // 2, len(relevant)), replace=False),
                             rng.choice(other, n - min(n // 2, len(relevant)), replace=False)])
    server = subprocess.Popen([sys.executable, "-c", "import sys; from kbench.cli import main; sys.exit(main())",
                               "serve", "--port", "0", "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True)
    try:
        line = server.stdout.readline()
        base_url = line.split("ready at ", 1)[1].split(" ", 1)[0]
        os.environ.setdefault("KBENCH_BENCH_KEY", "local")
        endpoint = llm.Endpoint("judge", base_url, "SmolLM2-135M-Instruct", "KBENCH_BENCH_KEY")
        policy = llm.LLMPolicy(timeout_s=timeout_s, concurrency=1, min_usable=0.0)
        with llm.LLMClient(endpoint, stage="judge", policy=policy, cache_root=workspace / "cache") as client:
            grades = LLMJudge(client).answers(questions, [pairs[i] for i in chosen]).grades
    finally:
        server.terminate()
        server.wait(timeout=30)
    return chosen, grades


def judges_part(args) -> int:
    workspace = Path(args.workspace).resolve()
    os.environ.setdefault("KBENCH_MODELS_DIR", str(workspace / "models"))  # never the checkout's shared models
    started = time.perf_counter()
    results = scifact_runs({"name": "scifact"}, workspace)
    qids, pairs, question_of, ranks, questions = pooled(results)
    qrels = next(iter(results.values())).dataset.qrels
    human = np.array([float(qrels.get(p.query_id, {}).get(p.doc_id, 0) > 0) for p, _ in pairs])
    configs = list(results)
    truth_scores = pooled_ndcg(human, question_of, ranks, len(qids), K)
    truth = float((truth_scores[0] - truth_scores[1]).mean())
    print(f"pool: {len(pairs)} pairs of {len(qids)} claims (top {K} of {', '.join(configs)}); "
          f"{int(human.sum())} relevant; full-set difference of pooled nDCG@{K} {truth:+.4f} (load {load()})",
          flush=True)

    # the trained judge: an ict set from 1,000 abstracts, its pools under the same two configs
    with tempfile.TemporaryDirectory(prefix="judges-") as tmp:
        from synthetic_agreement import build

        sample = load_dataset(DatasetConfig(name="scifact", max_documents=args.scifact_documents))
        build(sample.documents, Path(tmp) / "ict", "ict", 300, args.seed)
        generated = scifact_runs({"path": str(Path(tmp) / "ict")}, workspace)
        g_qids, g_pairs, _, _, g_questions = pooled(generated)
        g_dataset = next(iter(generated.values())).dataset
        train_pairs, counts = training_pairs(g_dataset, g_questions, g_pairs, negatives=3, max_pairs=args.max_pairs,
                                             seed=args.seed)
        report = train_judge(train_pairs, JudgeTrainingConfig("scifact-bench-judge", dataset="scifact ict",
                                                              epochs=args.epochs, seed=args.seed, force=True,
                                                              workspace=str(workspace)))
    card = report.card
    judge = TrainedJudge.load("scifact-bench-judge", str(workspace))
    trained = np.array(judge.grade([(questions[p.query_id], t) for p, t in pairs]), dtype=float)
    trained_binary = (trained >= 2).astype(float)
    kappa_trained = cohen_kappa(human.astype(int).tolist(), trained_binary.astype(int).tolist())
    print(f"trained judge: {card['counts']['pairs']} pairs ({counts}), {args.epochs} epoch(s), "
          f"{card['train_seconds']} s (estimated {card['estimated_seconds']} s); held-out AUC "
          f"{card['combination']['held_out_auc']}; kappa on the pool {kappa_trained:.3f} (load {load()})", flush=True)

    served = None
    if args.served_pairs:
        asked = time.perf_counter()
        chosen, grades = served_sample(pairs, human, questions, args.served_pairs, args.seed, workspace,
                                       args.served_timeout_s)
        per_answer = (time.perf_counter() - asked) / max(1, len(chosen))
        readable = [(int(human[i]), int(g >= 2)) for i, g in zip(chosen, grades) if g is not None]
        served = {"pairs": len(chosen), "readable": len(readable), "seconds_per_answer": per_answer,
                  "kappa": cohen_kappa(*map(list, zip(*readable))) if len(readable) >= 2 else float("nan"),
                  "grades": [g for g in grades]}
        print(f"served SmolLM2: {len(readable)} of {len(chosen)} answers held a grade ({per_answer:.1f} s an answer, "
              f"server start included); kappa on those {served['kappa']:.3f} (load {load()})", flush=True)
        subset = np.asarray(chosen)
        served["trained_kappa_same_pairs"] = cohen_kappa(human[subset].astype(int).tolist(),
                                                         trained_binary[subset].astype(int).tolist())

    y = truth_scores
    yhat = pooled_ndcg(trained_binary, question_of, ranks, len(qids), K)
    rng = np.random.default_rng(args.seed)
    table = []
    for n in (50, 100, 200):
        widths = {"humans": [], "trained": []}
        covered = {"humans": 0, "trained": 0}
        lams = []
        for _ in range(args.draws):
            labelled = np.zeros(len(qids), dtype=bool)
            labelled[rng.choice(len(qids), n, replace=False)] = True
            human_only = classical_mean(y[0, labelled] - y[1, labelled])
            ppi = ppi_difference(y[0, labelled], y[1, labelled], yhat[0, labelled], yhat[1, labelled],
                                 yhat[0, ~labelled], yhat[1, ~labelled])
            for name, e in (("humans", human_only), ("trained", ppi)):
                low, high = e.interval(0.05)
                widths[name].append(high - low)
                covered[name] += low <= truth <= high
            lams.append(ppi.lam)
        table.append((n, float(np.mean(widths["humans"])), covered["humans"] / args.draws,
                      float(np.mean(widths["trained"])), covered["trained"] / args.draws, float(np.mean(lams))))
    print(f"\nSciFact, {len(qids)} claims, pooled nDCG@{K} of {configs[0]} - {configs[1]} (truth {truth:+.4f}); "
          f"{args.draws} draws of the labelled questions; load average {load()}")
    print(f"kappa against the qrels (grade >= 2 relevant): trained judge {kappa_trained:.3f} on all {len(pairs)} "
          "pairs" + ("" if served is None else f"; on the served sample of {served['pairs']}: trained "
                     f"{served['trained_kappa_same_pairs']:.3f}, served SmolLM2 {served['kappa']:.3f} on the "
                     f"{served['readable']} readable"))
    print(f"{'labelled':>8s}  {'humans alone width':>18s} {'covers':>6s}  {'PPI++ trained width':>19s} {'covers':>6s} "
          f"{'lambda':>6s}  {'PPI++ served':>12s}")
    for n, hw, hc, tw, tc, lam in table:
        print(f"{n:8d}  {hw:18.4f} {hc:6.0%}  {tw:19.4f} {tc:6.0%} {lam:6.2f}  {'n/a':>12s}")
    if served is not None:
        hours = served["seconds_per_answer"] * len(pairs) / 3600
        print(f"(PPI++ served: n/a, not measured: its grades of all {len(pairs)} pairs would take SmolLM2 about "
              f"{hours:.1f} h at the measured {served['seconds_per_answer']:.1f} s an answer; "
              + ("with no readable grade in its sample, its grades carry nothing and PPI++ gives them lambda 0: "
                 "humans alone)" if not served["readable"] else "see its kappa above)"))
    print(f"total {time.perf_counter() - started:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({"pairs": len(pairs), "truth": truth, "kappa_trained": kappa_trained,
                                               "card": card, "served": served, "table": table}, indent=2,
                                              default=str))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="part", required=True)
    m = sub.add_parser("match")
    m.add_argument("--datasets", default="demo,scifact,chroma_chunking")
    m.add_argument("--methods", default="ict,heading")
    m.add_argument("--scifact-documents", type=int, default=1000)
    m.add_argument("--chroma-subset", default="chatlogs,state_of_the_union,wikitexts")
    j = sub.add_parser("judges")
    j.add_argument("--draws", type=int, default=200)
    j.add_argument("--max-pairs", type=int, default=400)
    j.add_argument("--epochs", type=int, default=1)
    j.add_argument("--scifact-documents", type=int, default=1000)
    j.add_argument("--served-pairs", type=int, default=60, help="0: skip the served model")
    j.add_argument("--served-timeout-s", type=float, default=900.0)
    for p in (m, j):
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--workspace", default="experiments", help="its cache/ keeps embeddings between runs")
        p.add_argument("--json")
    args = parser.parse_args()
    return match_part(args) if args.part == "match" else judges_part(args)


if __name__ == "__main__":
    sys.exit(main())
