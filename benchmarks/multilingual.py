"""Multilingual retrieval on fastapi_docs: the Supabase function in `query_lang: simple` against the language's own
PostgreSQL configuration, BM25 with and without the language's analyzer, MiniLM vector, and RRF.

Per language (``--langs``, default en, es, fr), a heading set is built from ``../shared/datasets/fastapi_docs/<lang>``
(``kbench datasets build synthetic --method heading``, ``--per-doc`` and ``--max`` questions, seed 0), and each
config runs on it. The table gives doc nDCG@10 per config and language with its 95% bootstrap interval over the
questions, and each language configuration's paired difference to ``simple`` (Supabase's default) with its interval.

    .venv/bin/python benchmarks/multilingual.py [--langs en,es,fr] [--per-doc 2] [--max 100] [--workspace DIR]

The defaults run in a few minutes on 2 cores (MiniLM embeds each language's ~1,000 chunks once; the other runs
reuse the vectors through the workspace cache).
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from kbench.config import load_experiment
from kbench.datasets.synthetic import build_from_source
from kbench.evaluation.significance import bootstrap_ci
from kbench.paths import REPO_ROOT
from kbench.runner import run_experiment

FASTAPI_DOCS = REPO_ROOT.parent / "shared" / "datasets" / "fastapi_docs"
# fastapi_docs folder -> PostgreSQL's configuration (and the bm25 leg's language) for it
CONFIG_OF = {"en": "english", "es": "spanish", "fr": "french", "de": "german", "pt": "portuguese", "ru": "russian"}
METRIC = "doc_ndcg_at_10"


def configs(language: str) -> dict[str, tuple[str, list[str]]]:
    """Row name -> (config file, --set overrides) for one language."""
    fts, bm25 = "retrieval.leg_params.postgres_fts", "retrieval.leg_params.bm25"
    return {
        "Supabase rrf_supabase, query_lang simple": ("rrf_supabase.yaml", [f"{fts}.config=simple"]),
        f"Supabase rrf_supabase, query_lang {language}": ("rrf_supabase.yaml", [f"{fts}.config={language}"]),
        "BM25, English analysis (language unset)": ("bm25.yaml", []),
        f"BM25, language {language}": ("bm25.yaml", [f"{bm25}.language={language}"]),
        "vector, MiniLM": ("vector.yaml", []),
        f"RRF, MiniLM + BM25 {language}": ("rrf.yaml", [f"{bm25}.language={language}"]),
    }


def per_query_metric(result) -> np.ndarray:
    frame = result.per_query
    column = METRIC if METRIC in frame.columns else next(c for c in frame.columns if c.endswith("ndcg_at_10"))
    return frame[column].to_numpy(dtype=float)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--langs", default="en,es,fr", help="fastapi_docs folders, comma-separated")
    parser.add_argument("--per-doc", type=int, default=2, help="heading questions per page")
    parser.add_argument("--max", type=int, default=100, help="questions per language")
    parser.add_argument("--workspace", default=None, help="run folders and caches (default: a temporary folder)")
    args = parser.parse_args()
    workspace = Path(args.workspace or tempfile.mkdtemp(prefix="kbench-multilingual-"))
    rows: dict[str, dict[str, str]] = {}
    started = time.perf_counter()
    for code in args.langs.split(","):
        language = CONFIG_OF[code]
        source = FASTAPI_DOCS / code
        if not source.is_dir():
            raise SystemExit(f"multilingual: {source} not found; fastapi_docs lives in ../shared/datasets")
        heading_set = workspace / "sets" / f"fastapi-{code}"
        build_from_source(str(source), heading_set, method="heading", per_doc=args.per_doc,
                          max_questions=args.max, seed=0, force=True)
        scores: dict[str, np.ndarray] = {}
        for row, (config, overrides) in configs(language).items():
            experiment = load_experiment(REPO_ROOT / "configs/retrieval" / config,
                                         [f"workspace={workspace}", "tracking.enabled=false",
                                          f"dataset.path={heading_set}", *overrides])
            scores[row] = per_query_metric(run_experiment(experiment, progress=False, log=False))
            low, high = bootstrap_ci(scores[row])
            generic = row.replace(f" {language}", " <lang>")
            rows.setdefault(generic, {})[code] = f"{scores[row].mean():.3f} [{low:.3f}, {high:.3f}]"
        simple, own = list(scores.values())[:2]
        low, high = bootstrap_ci(own - simple)
        rows.setdefault("Supabase: <lang> minus simple (paired)", {})[code] = \
            f"{(own - simple).mean():+.3f} [{low:+.3f}, {high:+.3f}]"
        print(f"{code}: {len(simple)} heading questions, {time.perf_counter() - started:.0f}s so far", flush=True)
    codes = args.langs.split(",")
    print(f"\ndoc nDCG@10 on fastapi_docs heading sets (95% bootstrap interval over questions); workspace {workspace}\n")
    print("| config | " + " | ".join(codes) + " |")
    print("|---|" + "---|" * len(codes))
    for row, cells in rows.items():
        print(f"| {row} | " + " | ".join(cells.get(c, "") for c in codes) + " |")


if __name__ == "__main__":
    main()
