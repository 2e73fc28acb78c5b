"""Do generated questions rank retrieval configs the way real questions do?

On each dataset with real questions (the demo set, SciFact's claims, Chroma's chunking set), ``ict`` and
``heading`` sets (and ``llm`` through ``kbench serve``: ``--methods ict,heading,llm``) are built from the same
documents (``kbench.datasets.synthetic``, as many questions as the
real set has, seed 0), and one grid of 8 configs (2 chunkers x 4 retrieval modes: vector, BM25, RRF and
weighted 0.5 fusion of the two; all-MiniLM-L6-v2) runs on the real set and on every generated set, exactly
as ``kbench run`` would (nothing logged). For each generated set:

- Kendall's tau (tau-b) between the 8 configs' mean nDCG@10 on it and on the real set;
- whether its winner is inside the real set's significance tie: the real best config and every config not
  significantly worse than it (paired randomization test, 10,000 sign flips, Holm over the 7 others, alpha
  0.05), as ``kbench compare`` ranks them;
- beside it, the real set's agreement ceiling: tau between the config means on two random halves of the real
  questions, median over ``--ceiling-splits`` seeded splits (``kbench.evaluation.agreement``). A generated set
  whose tau reaches it ranks configs as well as the real questions agree with themselves (each half holds half
  the questions, so the bar is that of a set half the size).

The level is the finest both sets judge at: chunks (span overlap) for the span sets, documents for SciFact
(its claims have document judgements). A generator that cannot read a corpus (``heading`` on text without
headings) is reported as such. SciFact keeps its judged abstracts plus a seeded sample up to
``--scifact-documents`` (1,000); Chroma's set keeps the corpora of ``--chroma-subset`` (chatlogs,
state_of_the_union, wikitexts by default: finance and pubmed are 1.2 MB of its 1.45, too slow for 2 cores).
``--folder PATH`` (repeatable) adds any BEIR or span folder with real questions; ``--max-questions N`` keeps a
seeded sample of N real questions per dataset (the generated sets get as many).

A method may carry generator options or filters after colons: ``heading:context=never`` (the heading alone),
``ict:min_bm25_rank=2`` (the build's leakage filter), so variants are measured side by side.

    .venv/bin/python benchmarks/synthetic_agreement.py [--datasets demo,scifact,chroma_chunking] [--folder PATH]
                                                       [--methods ict,heading] [--max-questions N] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from kbench import DatasetConfig, load_dataset, run_pipeline
from kbench.config import validate_experiment
from kbench.datasets.synthetic import (ALL_METHODS, METHODS, VERBATIM_SCOPE, Filters, LLMOptions, SyntheticError,
                                      build_llm_set, build_synthetic, proposer)
from kbench.evaluation.agreement import kendall_tau, split_half_ceiling
from kbench.evaluation.significance import rank_against_best

from bench_io import CHUNKERS, MODES

ALPHA = 0.05


def grid() -> list[tuple[str, dict, dict]]:
    return [(f"{c}/{m}", chunking, mode) for c, chunking in CHUNKERS.items() for m, mode in MODES.items()]


def run_grid(dataset: dict, workspace: Path, metric_level: str) -> dict[str, "np.ndarray"]:
    """config label -> per-query nDCG@10 (queries in one fixed order)."""
    out = {}
    for label, chunking, mode in grid():
        experiment = validate_experiment({
            "name": "synthetic-agreement", "workspace": str(workspace), "dataset": dataset, "chunking": chunking,
            "embedding": {"model": "all-MiniLM-L6-v2"},
            "retrieval": {**mode, "top_k": 20, "candidates_per_leg": 50, "latency": "batch"},
            "evaluation": {"k": [10]}, "tracking": {"experiment": "synthetic-agreement"}})
        result = run_pipeline(experiment, progress=False)
        frame = result.per_query.set_index("query_id").sort_index()
        out[label] = frame[f"{metric_level}_ndcg_at_10"].to_numpy(dtype=float)
    return out


def real_tie(scores: dict[str, np.ndarray]) -> tuple[str, set[str]]:
    """The best config by mean and every config not significantly worse (randomization test, Holm), by the rule
    ``kbench compare`` ranks with (``significance.rank_against_best``)."""
    ranked = rank_against_best(scores, alpha=ALPHA)
    return ranked[0].label, {v.label for v in ranked if v.verdict != "worse"}


FILTER_KEYS = {f for f in Filters.__dataclass_fields__}


def parse_method(spec: str) -> tuple[str, dict, Filters]:
    """``heading:context=never:min_body_words=12`` -> ("heading", {options}, Filters(...)); values read as YAML
    scalars would be (numbers, true/false), else strings."""
    name, *pairs = spec.split(":")
    options, filters = {}, {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        parsed = json.loads(value) if value.replace(".", "", 1).lstrip("-").isdigit() or value in (
            "true", "false") else value
        (filters if key in FILTER_KEYS else options)[key] = parsed
    return name, options, Filters(**filters)


def build(documents, out: Path, spec: str, n_questions: int, seed: int, llm: LLMOptions | None = None,
          llm_params: dict | None = None):
    method, options, filters = parse_method(spec)
    if method == "llm":
        return build_llm_set(documents, out, llm, seed=seed, max_questions=n_questions, filters=filters,
                             params={**(llm_params or {}), **options})
    params = {**METHODS[method].DEFAULTS, **options}
    return build_synthetic(documents, out, method=method, propose=proposer(method, documents, params),
                           seed=seed, max_questions=n_questions, filters=filters,
                           verbatim_scope=VERBATIM_SCOPE[method])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="demo,scifact,chroma_chunking")
    parser.add_argument("--folder", action="append", default=[], metavar="PATH",
                        help="also a BEIR or span folder with real questions (repeatable)")
    parser.add_argument("--methods", default="ict,heading",
                        help="comma-separated; a method may carry options or filters: heading:context=never")
    parser.add_argument("--max-questions", type=int, default=None,
                        help="a seeded sample of this many real questions per dataset (default: all)")
    parser.add_argument("--ceiling-splits", type=int, default=200,
                        help="seeded random halves of the real questions for the agreement ceiling")
    parser.add_argument("--scifact-documents", type=int, default=1000)
    parser.add_argument("--chroma-subset", default="chatlogs,state_of_the_union,wikitexts",
                        help="Chroma corpora to use ('' = all five; finance and pubmed are 1.2 MB of the 1.45)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workspace", default="experiments", help="its cache/ keeps embeddings between runs")
    parser.add_argument("--json", help="also write every figure here")
    parser.add_argument("--llm-base-url", default="http://127.0.0.1:8000/v1", help="llm: `kbench serve`'s address")
    parser.add_argument("--llm-model", default="SmolLM2-135M-Instruct", help="llm: the chat model")
    parser.add_argument("--llm-timeout-s", type=float, default=600.0,
                        help="llm: seconds per answer (SmolLM2 on 2 busy cores can take minutes)")
    parser.add_argument("--llm-max-questions", type=int, default=None,
                        help="llm: at most this many questions (default: as many as the real set; SmolLM2 on 2 busy "
                             "cores takes about a minute per question)")
    parser.add_argument("--llm-max-tokens", type=int, default=None,
                        help="llm: tokens per answer (default: the llm method's 200)")
    parser.add_argument("--llm-concurrency", type=int, default=1,
                        help="llm: requests in flight (kbench serve generates one at a time; more only queue there)")
    args = parser.parse_args()
    methods = [m for m in args.methods.split(",") if m]
    unknown = sorted({m.split(":")[0] for m in methods} - set(ALL_METHODS))
    if unknown:
        print(f"--methods: unknown {unknown}; choose from {ALL_METHODS}", file=sys.stderr)
        return 2
    workspace = Path(args.workspace).resolve()
    os.environ.setdefault("OPENAI_API_KEY", "local")  # kbench serve checks no key; the client wants one set
    llm = LLMOptions(args.llm_base_url, args.llm_model, "OPENAI_API_KEY", str(workspace), args.llm_timeout_s,
                     args.llm_concurrency)
    rows, figures = [], {}
    with tempfile.TemporaryDirectory(prefix="synthetic-agreement-") as tmp:
        sources = [(d, {"name": d}) for d in args.datasets.split(",") if d]
        sources += [(Path(f).name, {"path": str(Path(f).resolve())}) for f in args.folder]
        for name, real_config in sources:
            started = time.perf_counter()
            real_config = dict(real_config)
            if args.max_questions:
                real_config.update(max_queries=args.max_questions, seed=args.seed)
            if name == "scifact":
                real_config["max_documents"] = args.scifact_documents
            if name == "chroma_chunking" and args.chroma_subset:
                real_config["subset"] = args.chroma_subset.split(",")
            real = load_dataset(DatasetConfig(**real_config))
            level = "doc" if not real.spans else "chunk"
            real_scores = run_grid(real_config, workspace, level)
            best, tie = real_tie(real_scores)
            ceiling = split_half_ceiling(real_scores, args.ceiling_splits, args.seed)
            labels = list(real_scores)
            real_means = np.array([real_scores[k].mean() for k in labels])
            figures[name] = {"level": level, "questions": len(real.queries), "documents": len(real.documents),
                             "real": {k: float(real_scores[k].mean()) for k in labels}, "real_best": best,
                             "real_tie": sorted(tie), "ceiling": vars(ceiling), "generated": {},
                             "real_per_query": {k: real_scores[k].tolist() for k in labels}}
            rows.append((name, "real", len(real.queries), "", ceiling.text(), best, "", len(tie)))
            for method in methods:
                out = Path(tmp) / "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in f"{name}-{method}")
                try:
                    n = len(real.queries)
                    if method == "llm" and args.llm_max_questions:
                        n = min(n, args.llm_max_questions)
                    report = build(real.documents, out, method, n, args.seed, llm,
                                   {"max_tokens": args.llm_max_tokens} if args.llm_max_tokens else None)
                except SyntheticError as e:
                    rows.append((name, method, 0, "n/a", ceiling.text(), "-", "-", "-"))
                    figures[name]["generated"][method] = {"error": str(e)}
                    print(f"{name} {method}: {e}", file=sys.stderr)
                    continue
                scores = run_grid({"path": str(out)}, workspace, level)
                means = np.array([scores[k].mean() for k in labels])
                tau = kendall_tau(real_means, means)
                winner = max(scores, key=lambda k: scores[k].mean())
                rows.append((name, method, report.kept, f"{tau:+.3f}", ceiling.text(), winner,
                             "yes" if winner in tie else "no", ""))
                print(f"{name} {method}: kept {report.kept} of {report.proposals} proposals; rejected "
                      f"{dict(sorted(report.rejected.items()))}; {report.cache or ''}", file=sys.stderr, flush=True)
                figures[name]["generated"][method] = {
                    "questions": report.kept, "proposals": report.proposals, "rejected": dict(report.rejected),
                    "cache": report.cache, "tau": tau, "winner": winner, "winner_in_real_tie": winner in tie,
                    "means": {k: float(scores[k].mean()) for k in labels}, "leakage": report.leakage,
                    "per_query": {k: scores[k].tolist() for k in labels}}
            print(f"done: {name} in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)

    print(f"\nGrid: {len(grid())} configs = chunkers {', '.join(CHUNKERS)} x modes {', '.join(MODES)}; "
          f"all-MiniLM-L6-v2; nDCG@10; tie = not worse than the real best (randomization, Holm, alpha {ALPHA})")
    print(f"ceiling = tau between two random halves of the real questions, median [quartiles] over "
          f"{args.ceiling_splits} seeded splits\n")
    width = max([8] + [len(r[1]) for r in rows])
    head = (f"{'dataset':16s} {'set':{width}s} {'questions':>9s} {'tau':>7s}  {'ceiling':24s} {'winner':24s} "
            f"{'in real tie':>11s}")
    print(head)
    print("-" * len(head))
    for name, kind, n, tau, ceiling_text, winner, inside, tie_size in rows:
        extra = f"   (tie: {tie_size} configs)" if kind == "real" else ""
        print(f"{name:16s} {kind:{width}s} {n:9d} {tau:>7s}  {ceiling_text:24s} {winner:24s} {inside:>11s}{extra}")
    print("\nMean nDCG@10 per config (real | " + " | ".join(methods) + ")")
    for name, f in figures.items():
        print(f"  {name} ({f['level']} level):")
        for k in f["real"]:
            gen = [f"{f['generated'][m]['means'][k]:.4f}" if "means" in f["generated"].get(m, {}) else "  n/a "
                   for m in methods]
            print(f"    {k:24s} {f['real'][k]:.4f} | " + " | ".join(gen))
    print("\nBuilder reports (kept; rejected by reason)")
    for name, f in figures.items():
        for m, g in f["generated"].items():
            print(f"  {name} {m}: " + (f"kept {g['questions']} of {g['proposals']}; rejected "
                                       f"{dict(sorted(g['rejected'].items()))}" if "questions" in g else g["error"]))
    for method in methods:
        done = [f["generated"][method] for f in figures.values() if "tau" in f["generated"].get(method, {})]
        if done:
            taus = [d["tau"] for d in done]
            inside = sum(d["winner_in_real_tie"] for d in done)
            ceilings = [f["ceiling"]["median"] for f in figures.values() if "tau" in f["generated"].get(method, {})]
            print(f"\n{method}: mean tau {np.mean(taus):+.3f} (mean ceiling {np.mean(ceilings):+.3f}) over "
                  f"{len(done)} datasets; winner inside the real tie on {inside} of {len(done)}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
