"""kbench compare (runs or a sweep, with significance), kbench export (TREC/ranx files), kbench import-trec."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from kbench.cli.tables import format_table
from kbench.compare import CompareError, compare_runs, summary_lines, write_report
from kbench.compare.report import TEST_NAMES, format_p
from kbench.config import load_experiment
from kbench.paths import workspace_dir
from kbench.runner import export_run, import_trec_run


def add_parser(sub) -> None:
    p = sub.add_parser("compare", help="compare runs or a sweep: metric differences to a baseline with paired "
                                       "significance tests, bootstrap CIs and a markdown/HTML report")
    p.add_argument("runs", nargs="*", metavar="RUN_ID", help="MLflow run ids to compare (or use --sweep)")
    p.add_argument("--sweep", metavar="PARENT_RUN_ID", help="compare every finished config of this sweep")
    p.add_argument("--baseline", help="label or run id of the baseline (default: the sweep's baseline config, "
                                      "else the first run)")
    p.add_argument("--metric", dest="metrics", action="append", metavar="NAME",
                   help="per-query metric column, repeatable (default: nDCG, recall, MRR at 10 of the finest level)")
    p.add_argument("--test", choices=["randomization", "t", "wilcoxon"], default="randomization",
                   help="the test whose p-values are corrected and decide 'significant' (all three are reported)")
    p.add_argument("--correction", choices=["holm", "bonferroni", "none"], default="holm")
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--tracking-uri", help="MLflow store (default: MLFLOW_TRACKING_URI or experiments/mlflow.db)")
    p.add_argument("--out", help="write report.md, report.html and plots here (default: a folder under the workspace)")
    p.add_argument("--log", action="store_true", help="also log the report as artifacts of the sweep's parent run")
    p.set_defaults(func=run_compare)

    e = sub.add_parser("export", help="write a logged run's ranking and qrels as TREC files (run.trec, qrels.txt)")
    e.add_argument("run_id", metavar="RUN_ID")
    e.add_argument("--out", required=True, help="folder for run.trec and qrels.txt")
    e.add_argument("--level", choices=["doc", "chunk"], default="doc",
                   help="doc: documents at the rank of their best chunk, qrels from the dataset; chunk: chunk ids, "
                        "qrels from span overlap (span datasets)")
    e.add_argument("--tracking-uri")
    e.set_defaults(func=run_export)

    i = sub.add_parser("import-trec", help="score a TREC run file from another tool on a config's dataset and log it "
                                           "as a kbench run (then kbench compare can test it against kbench runs)")
    i.add_argument("run_file", help="TREC run: 'qid Q0 docid rank score tag' per line")
    i.add_argument("--config", required=True, help="the config whose dataset (and evaluation.k) to score against")
    i.add_argument("--name", help="run name (default: the file's tag column)")
    i.add_argument("--no-log", action="store_true")
    i.set_defaults(func=run_import)


def _quiet_mlflow() -> None:
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")


def run_compare(args) -> int:

    _quiet_mlflow()
    if bool(args.sweep) == bool(args.runs):
        print("kbench: error: give run ids or --sweep PARENT_RUN_ID (one of them)", file=sys.stderr)
        return 2
    try:
        comparison = compare_runs(args.sweep or args.runs, baseline=args.baseline, metrics=args.metrics,
                                  tracking_uri=args.tracking_uri, test=args.test, correction=args.correction,
                                  alpha=args.alpha)
    except CompareError as e:
        print(f"kbench: error: {e}", file=sys.stderr)
        return 2
    print(format_table(*overview_table(comparison), numeric=[True, False] + [True] * len(comparison.metrics)))
    print(f"* best, = tied with the best (no significant difference: {TEST_NAMES[comparison.test]}, "
          f"{comparison.correction} correction, α = {comparison.alpha}); rows sorted by {comparison.headline}")
    print()
    for metric in comparison.metrics:
        headers, rows = metric_table(comparison, metric, args.test)
        print(format_table(headers, rows, numeric=[True, False, True, True, True, False] + [True] * 4 + [False]))
        print()
    for line in summary_lines(comparison):
        print(line)
    name = comparison.parent_run_id or "-".join(r.run_id[:8] for r in comparison.runs)
    out = Path(args.out) if args.out else workspace_dir() / "comparisons" / name
    write_report(comparison, out)
    print(f"\nreport: {out / 'report.md'} and {out / 'report.html'}")
    if args.log:
        if not comparison.parent_run_id:
            print("kbench: error: --log needs --sweep (the report is logged to the sweep's parent run)", file=sys.stderr)
            return 2
        from mlflow.tracking import MlflowClient

        MlflowClient(comparison.tracking_uri).log_artifacts(comparison.parent_run_id, str(out), "report")
        print(f"logged as artifacts report/ of run {comparison.parent_run_id}")
    return 0


def overview_table(comparison) -> tuple[list[str], list[list[object]]]:
    """Like ranx's tables: one row per config sorted by the headline metric, one column per metric, the best
    of each column marked * and the configs tied with it =."""
    marks = {}
    for metric in comparison.metrics:
        for r in comparison.ranking(metric).itertuples():
            marks[(r.config, metric)] = {"best": " *", "tied": " ="}.get(r.vs_best, "  ")
    means = comparison.wide("mean")
    rows = []
    for r in comparison.ranking().itertuples():
        rows.append([r.rank, r.config + (" (baseline)" if r.baseline else "")]
                    + [f"{means.loc[r.config, m]:.4f}{marks[(r.config, m)]}" for m in comparison.metrics])
    return ["#", "config", *comparison.metrics], rows


def metric_table(comparison, metric: str, test: str) -> tuple[list[str], list[list[object]]]:
    """One metric, best first: mean with its interval, the verdict against the best, and the difference to the
    baseline with its effect size and p-values."""
    table = comparison.table[comparison.table["metric"] == metric].set_index("config")
    rows = []
    for rank in comparison.ranking(metric).itertuples():
        r = table.loc[rank.config]
        vs_best = "best" if rank.vs_best == "best" else f"{rank.vs_best} (p {format_p(rank.p_vs_best_adjusted)})"
        rows.append([rank.rank, rank.config + (" (baseline)" if r["baseline"] else ""), r["mean"], r["ci_low"],
                     r["ci_high"], vs_best, "–" if r["baseline"] else f"{r['diff']:+.4f}",
                     "–" if r["baseline"] else f"{r['effect_size']:.2f}", format_p(r[f"p_{test}"]),
                     format_p(r["p_adjusted"]), "yes" if r["significant"] else ""])
    return ["#", metric, "mean", "ci_low", "ci_high", "vs best", "Δ baseline", "d", f"p_{test}", "p_adj", "sig"], rows


def run_export(args) -> int:

    _quiet_mlflow()
    paths = export_run(args.run_id, args.out, level=args.level, tracking_uri=args.tracking_uri)
    for kind, path in paths.items():
        print(f"{kind}: {path}")
    return 0


def run_import(args) -> int:

    result = import_trec_run(args.run_file, load_experiment(args.config), name=args.name, log=not args.no_log)
    print(f"scored {result.counts['queries']} queries of {result.experiment.dataset.name or result.experiment.dataset.path}")
    for key in sorted(k for k in result.metrics if k.startswith("doc_") and k.endswith(("_at_10", "_at_100"))):
        print(f"  {key} {result.metrics[key]:.4f}")
    print(f"results: {result.run_dir}")
    if result.run_id:
        print(f"MLflow run {result.run_id} in {result.tracking_uri}")
    return 0
