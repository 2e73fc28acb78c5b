"""Compare chunkers by span metrics: one run per variant of a comparison config, one table at the end.

    .venv/bin/python benchmarks/chunker_comparison.py configs/spans/chroma_chunkers.yaml
    .venv/bin/python benchmarks/chunker_comparison.py configs/spans/code_qa_chunkers.yaml \\
        --set dataset.path=/tmp/code-qa-yaml
    ... --only fixed-250t smart-250t          # some variants
    ... --set dataset.subset='[chatlogs, state_of_the_union]'   # some Chroma corpora

A comparison config is an ordinary experiment config plus ``variants``: a list of ``{name, <section>:
{...}}``; each section a variant names *replaces* the base section (a chunker's knobs differ from the
next one's). Variants whose chunker is not registered are reported and skipped, so the script runs
while chunkers are still being written. Every run is a normal kbench run (run folder + MLflow, the
shared embedding cache), and the table is rewritten after each run to
``<workspace>/benchmarks/<config name>-<UTC time>.md``, so finished rows survive an interrupted comparison.
"""
from __future__ import annotations

import argparse
import copy
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from kbench import CHUNKERS, format_table, load_experiment, run_experiment, validate_experiment, workspace_dir
# Which chunkers exist decides which variants run: the chunker registry (not in the public API).

COLUMNS = [  # (header, metric key)
    ("recall@5", "span_recall_at_5"), ("recall@10", "span_recall_at_10"),
    ("precision@5", "span_precision_at_5"), ("precision@10", "span_precision_at_10"),
    ("IoU@5", "span_iou_at_5"), ("IoU@10", "span_iou_at_10"),
    ("precision-Ω", "span_precision_omega"), ("nDCG@10", "chunk_ndcg_at_10"),
    ("chunks", "count_chunks"),
]


def variant_configs(path: Path, overrides: list[str]) -> tuple[dict, list[tuple[str, dict]]]:
    base = load_experiment(path, overrides).resolved()  # the base config, --set applied, defaults filled in
    variants = base.pop("variants", None) or [{"name": base.get("name", "base")}]
    out = []
    for variant in variants:
        data = copy.deepcopy(base)
        variant = dict(variant)
        name = str(variant.pop("name"))
        for section, value in variant.items():
            data[section] = copy.deepcopy(value)
        data["name"] = f"{base.get('name', 'comparison')}-{name}"
        data.setdefault("tracking", {}).setdefault("tags", {})["kbench.variant"] = name
        out.append((name, data))
    return base, out


def mean_chunk_chars(chunks) -> float:
    return sum(c.end - c.start for c in chunks) / len(chunks) if chunks else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", type=Path, nargs="?", default=Path("configs/spans/chroma_chunkers.yaml"))
    parser.add_argument("--only", nargs="*", help="variant names to run (default: all)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override the base config, e.g. --set dataset.path=/tmp/code-qa")
    parser.add_argument("--no-log", action="store_true", help="do not log to MLflow")
    args = parser.parse_args(argv)

    base, variants = variant_configs(args.config, args.overrides)
    known = set(CHUNKERS.names())
    rows, skipped = [], []
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out_file = workspace_dir(base.get("workspace", "experiments")) / "benchmarks" / f"{base.get('name')}-{stamp}.md"
    out_file.parent.mkdir(parents=True, exist_ok=True)
    for name, data in variants:
        if args.only and name not in args.only:
            continue
        strategy = (data.get("chunking") or {}).get("strategy", "fixed")
        if strategy not in known:
            skipped.append(f"{name} (chunker {strategy!r} not registered)")
            print(f"skip {name}: chunker {strategy!r} is not registered", flush=True)
            continue
        experiment = validate_experiment(data, f"{args.config} variant {name}")
        started = time.perf_counter()
        result = run_experiment(experiment, progress=False, log=not args.no_log)
        m = result.metrics
        row = [name, *(int(m[key]) if key == "count_chunks" else m.get(key, float("nan")) for _, key in COLUMNS),
               round(mean_chunk_chars(result.chunks)), round(time.perf_counter() - started),
               int(m.get("count_embeddings_computed", 0))]
        rows.append(row)
        table = format_table(["variant", *(h for h, _ in COLUMNS), "mean chars", "wall s", "embedded"], rows)
        print(f"\n{table}\n", flush=True)
        out_file.write_text(
            f"# {base.get('name')}\n\nconfig: {args.config}; overrides: {args.overrides or 'none'}; "
            f"{result.counts.get('queries')} questions, {result.counts.get('documents')} documents\n\n"
            f"```\n{table}\n```\n" + (f"\nskipped: {', '.join(skipped)}\n" if skipped else ""),
            encoding="utf-8")
    if skipped:
        print("skipped: " + ", ".join(skipped))
    print(f"table: {out_file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
