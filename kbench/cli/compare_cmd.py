"""kbench compare (runs or a sweep, with significance), kbench export (TREC/ranx files), kbench import-trec."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from typing import TYPE_CHECKING

import kbench
from kbench import compare, judging, sweep, tracking
from kbench.cli import add_command
from kbench.cli.tables import format_table
from kbench.errors import ConfigError
from kbench.evaluation.config import RecommendConfig
from kbench.judging import MIN_JUDGED
from kbench.paths import workspace_dir
from kbench.tracking import tags as tag

if TYPE_CHECKING:  # annotations only
    from kbench.compare.compare import Comparison


def add_parser(sub) -> None:
    p = add_command(sub, "compare")
    p.add_argument("runs", nargs="*", metavar="RUN_ID", help="MLflow run ids to compare (or use --sweep)")
    p.add_argument("--sweep", metavar="PARENT_RUN_ID", action="append",
                   help="compare every finished config of this sweep; repeated (--sweep A --sweep B): sweeps of the "
                        "same configs on several evaluation sets, one pick across them (each config's bound per set, "
                        "the smallest worst bound, where the sets disagree)")
    p.add_argument("--sets", nargs=2, metavar=("SWEEP_A", "SWEEP_B"),
                   help="two sweeps of the same configs on two evaluation sets (parent run ids): Kendall's tau of "
                        "their rankings with a bootstrap interval, whether their best configs agree, the pairs "
                        "that flip")
    p.add_argument("--baseline", help="label or run id of the baseline (default: the sweep's baseline config, "
                                      "else the first run)")
    p.add_argument("--metric", dest="metrics", action="append", metavar="NAME",
                   help="per-query metric column, repeatable (default: nDCG, recall, MRR at 10 of the finest level)")
    p.add_argument("--test", choices=["randomization", "t", "wilcoxon"], default="randomization",
                   help="the test whose p-values are corrected and decide 'significant' (all three are reported)")
    p.add_argument("--correction", choices=["holm", "bonferroni", "fdr_bh", "none"], default="holm",
                   help="multiple-comparison correction over every (config, metric) test: holm and bonferroni "
                        "control the family-wise error, fdr_bh (Benjamini-Hochberg) the false discovery rate")
    p.add_argument("--slice", dest="slices", action="append", metavar="KEY",
                   help="also compare per slice (evaluation.slices of the runs: doc_type, corpus, query_length, "
                        "query.<field>, doc.<field>), tested and corrected as one family; repeatable")
    p.add_argument("--frontier", metavar="METRIC", help="print and plot the Pareto frontier of METRIC against --cost")
    p.add_argument("--cost", metavar="COST", default="latency_ms_total_p95",
                   help="the cost run metric for --frontier (latency_ms_<stage>_p50/p95, cost_index_bytes, "
                        "cost_embed_seconds, llm_total_cost_usd, ...); default latency_ms_total_p95")
    p.add_argument("--constraint", dest="constraints", action="append", default=[], metavar="EXPR",
                   help="with --frontier: pick the best config meeting EXPR, e.g. 'latency_ms_total_p95<50'; "
                        "repeatable (all must hold)")
    p.add_argument("--judged-qrels", metavar="QRELS",
                   help="re-score every run from its saved ranking with these judged qrels (the --out of kbench "
                        "judge; no re-retrieval) and compare the document-level metrics; reports judged_at_k per run")
    p.add_argument("--judged-use", choices=["beside", "instead"], default="beside",
                   help="with --judged-qrels: beside (the dataset's own labels win) or instead of the dataset's qrels")
    p.add_argument("--min-judged", type=float, default=MIN_JUDGED, metavar="F",
                   help="with --judged-qrels: mark (†) runs whose judged_at_k with the judged qrels is below F "
                        f"(default {MIN_JUDGED}): their metrics rest on a thin pool")
    p.add_argument("--margin", metavar="M",
                   help="how much worse than the best a cheaper config may be and still be recommended: 0.01 "
                        "(absolute) or 2%% (of the best's mean); default: the sweep's recommend.margin, 0.01")
    p.add_argument("--guard", dest="guards", action="append", metavar="METRIC",
                   help="a quality metric a cheaper config must also be within the margin on, beside the headline; "
                        "repeatable; replaces the sweep's recommend.guards (default: doc_ndcg_at_10, "
                        "chunk_ndcg_at_10, recall_at_10)")
    p.add_argument("--recommend-cost", metavar="METRIC",
                   help="the run metric that picks the cheapest of the configs within the margin (default: the "
                        "sweep's recommend.cost, cost_index_bytes)")
    p.add_argument("--latency-budget-ms", type=float, metavar="MS",
                   help="exclude configs whose p95 latency (of recommend.latency_stage, total by default) is above "
                        "MS from the recommendation (default: the sweep's recommend.latency_budget_ms, none)")
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--tracking-uri", help="MLflow store (default: MLFLOW_TRACKING_URI or experiments/mlflow.db)")
    p.add_argument("--out", help="write report.md, report.html and plots here (default: a folder under the workspace)")
    p.add_argument("--log", action="store_true", help="also log the report as artifacts of the sweep's parent run (with "
                                                      "several --sweep: one MLflow run holding the pick across sets)")
    p.set_defaults(func=run_compare)

    e = add_command(sub, "export")
    e.add_argument("run_id", metavar="RUN_ID")
    e.add_argument("--out", required=True, help="folder for the files")
    e.add_argument("--format", choices=["trec", "autorag"], default="trec",
                   help="trec: run.trec + qrels.txt; autorag: corpus.parquet, qa.parquet, retrieval.parquet")
    e.add_argument("--level", choices=["doc", "chunk"], default="doc",
                   help="doc: documents at the rank of their best chunk, qrels from the dataset; chunk: chunk ids, "
                        "qrels from span overlap (span datasets)")
    e.add_argument("--tracking-uri")
    e.set_defaults(func=run_export)

    i = add_command(sub, "import-trec")
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
    if args.sets:
        if args.sweep or args.runs:
            print("kbench: error: --sets compares two sweeps by themselves; give no run ids or --sweep with it",
                  file=sys.stderr)
            return 2
        return run_compare_sets(args)
    if bool(args.sweep) == bool(args.runs):
        print("kbench: error: give run ids or --sweep PARENT_RUN_ID (one of them)", file=sys.stderr)
        return 2
    if args.sweep and len(args.sweep) > 1:
        return run_compare_across(args)
    args.sweep = args.sweep[0] if args.sweep else None
    if not 0 <= args.min_judged <= 1:
        print("kbench: error: --min-judged is a share between 0 and 1, e.g. 0.8", file=sys.stderr)
        return 2
    constraints = [compare.frontier.parse_constraint(text) for text in args.constraints]
    if constraints and not args.frontier:
        raise compare.frontier.FrontierError("--constraint needs --frontier METRIC (the metric to maximise)")
    judged = None
    if args.judged_qrels:  # re-scored from the saved rankings (kbench.judging.rescore)
        qrels = judging.rescore.JudgedQrels.read(args.judged_qrels, args.judged_use)
        judged = judging.rescore.compare_judged(args.sweep or args.runs, qrels, baseline=args.baseline,
                                                metrics=args.metrics, tracking_uri=args.tracking_uri,
                                                test=args.test, correction=args.correction, alpha=args.alpha,
                                                min_judged=args.min_judged)
        comparison = judged.comparison
    else:
        comparison = compare.compare_runs(args.sweep or args.runs, baseline=args.baseline, metrics=args.metrics,
                                          tracking_uri=args.tracking_uri, test=args.test,
                                          correction=args.correction, alpha=args.alpha,
                                          progress=lambda line: print(line, file=sys.stderr, flush=True))
    frontier = None
    if args.frontier:
        points = compare.frontier.run_points(comparison.runs,
                                             [args.frontier, args.cost, *(c.metric for c in constraints)])
        frontier = compare.frontier.pareto_frontier(points, args.frontier, args.cost)
    sliced = {key: compare.slices.compare_by_slice(comparison.runs, key, baseline=comparison.baseline,
                                                   metrics=comparison.metrics, test=args.test,
                                                   correction=args.correction, alpha=args.alpha)
              for key in args.slices or []}
    if "language" not in sliced:  # a set asked in two or more languages: per language without asking
        languages = compare.slices.language_table(comparison)
        if languages is not None:
            sliced["language"] = languages
    recommendation = compare.recommendation.recommend_comparison(comparison, recommend_config(args, comparison))
    thin = set(judged.thin) if judged is not None else set()
    if judged is not None:
        print_judged(judged)
    print(format_table(*overview_table(comparison, thin), numeric=[True, False] + [True] * len(comparison.metrics)))
    print(f"* best, = not told apart from the best (no significant difference, which is not \"as good\": "
          f"{compare.report.TEST_NAMES[comparison.test]}, "
          f"{comparison.correction} correction, α = {comparison.alpha}); rows sorted by {comparison.headline}")
    if thin:
        print(f"† computed on a thin pool: judged_at_{judged.k} below {judged.min_judged:.2f} with the judged qrels")
    print()
    for metric in comparison.metrics:
        headers, rows = metric_table(comparison, metric, args.test, thin)
        print(format_table(headers, rows, numeric=[True, False, True, True, True, False] + [True] * 4 + [False]))
        print()
    for line in compare.summary_lines(comparison):
        print(line)
    name = comparison.parent_run_id or "-".join(r.run_id[:8] for r in comparison.runs)
    out = Path(args.out) if args.out else workspace_dir() / "comparisons" / name
    rows, legend = sweep_knobs(comparison) if comparison.parent_run_id else ([], [])
    compare.write_report(comparison, out, configs=rows, configs_legend=legend, recommendation=recommendation.lines())
    for key, table in sliced.items():
        print()
        print_slice_table(table, key, comparison)
        table.to_csv(out / f"slices_{key}.csv", index=False)
    if frontier is not None:
        print()
        print_frontier(frontier, args.frontier, args.cost, constraints)
        frontier.to_csv(out / "frontier.csv", index=False)
        compare.frontier.plot_frontier(frontier, args.frontier, args.cost, out / "frontier.png")
    print()
    for line in recommendation.lines():
        print(line)
    print(f"\nreport: {out / 'report.md'} and {out / 'report.html'}")
    if args.log:
        if not comparison.parent_run_id:
            print("kbench: error: --log needs --sweep (the report is logged to the sweep's parent run)", file=sys.stderr)
            return 2
        from mlflow.tracking import MlflowClient

        MlflowClient(comparison.tracking_uri).log_artifacts(comparison.parent_run_id, str(out), "report")
        print(f"logged as artifacts report/ of run {comparison.parent_run_id}")
    return 0


def recommend_config(args, comparison: Comparison) -> RecommendConfig:
    """--margin / --guard / --recommend-cost / --latency-budget-ms, else what the sweep ended with (its parent's
    tag), else the defaults."""
    config = None
    if comparison.parent_run_id:
        config = compare.recommendation.sweep_recommend_config(tracking.read.tracking_client(comparison.tracking_uri)
                                                               .get_run(comparison.parent_run_id).data.tags)
    return compare.recommendation.with_flags(config or RecommendConfig(),
                                             "--margin / --guard / --recommend-cost / --latency-budget-ms",
                                             margin=args.margin, guards=args.guards or None, cost=args.recommend_cost,
                                             latency_budget_ms=args.latency_budget_ms)


def run_compare_across(args) -> int:
    """Sweeps of the same configs on several sets (--sweep repeated): one pick across them."""
    unused = [flag for flag, given in (("--judged-qrels", args.judged_qrels), ("--frontier", args.frontier),
                                       ("--slice", args.slices), ("--baseline", args.baseline)) if given]
    if len(set(args.sweep)) < len(args.sweep):
        print("kbench: error: --sweep names the same sweep twice; give one sweep per evaluation set", file=sys.stderr)
        return 2
    if unused:
        print(f"kbench: error: {', '.join(unused)} compare one sweep; with several --sweep (one pick across sets) give "
              "none of them, or compare each sweep by itself", file=sys.stderr)
        return 2
    try:
        check_sweep_parents(args.sweep, args.tracking_uri, "--sweep {} is not a sweep's parent run; give one sweep "
                                                           "parent run id per evaluation set (kbench runs --sweeps)")
        comparisons = [compare.compare_runs(parent, metrics=args.metrics, tracking_uri=args.tracking_uri,
                                            test=args.test, correction=args.correction, alpha=args.alpha,
                                            progress=lambda line: print(line, file=sys.stderr, flush=True))
                       for parent in args.sweep]
        found = compare.across.across_comparisons(comparisons, config=recommend_config(args, comparisons[0]))
    except (compare.CompareError, tracking.read.RunReadError) as e:
        print(f"kbench: error: {e}", file=sys.stderr)
        return 2
    for line in found.lines():
        print(line)
    out = Path(args.out) if args.out else workspace_dir() / "comparisons" / ("across-" + "-".join(
        parent[:8] for parent in args.sweep))
    compare.across.write_across(found, out)
    print(f"\nwritten: {out / 'across.txt'} (with each set's own recommendation) and {out / 'across.json'}")
    if args.log:
        run_id = compare.across.log_across(found, comparisons, tracking_uri=args.tracking_uri, folder=out)
        print(f"logged as run {run_id} (tag kbench.sweep.role = across), beside the sweeps")
    return 0


def check_sweep_parents(run_ids: list[str], tracking_uri: str | None, message: str) -> None:
    """Each id is a sweep's parent run, else CompareError(``message`` with the first id that is not)."""
    client = tracking.read.tracking_client(tracking_uri)
    for run_id in run_ids:
        if tracking.read.get_run(client, run_id).data.tags.get(tag.SWEEP_ROLE) != "parent":
            raise compare.CompareError(message.format(run_id))


def run_compare_sets(args) -> int:
    """Two sweeps of the same configs on two evaluation sets: how alike they rank the configs."""
    if args.sets[0] == args.sets[1]:  # one set against itself agrees by construction: no finding, refused
        print(f"kbench: error: --sets: both are sweep {args.sets[0]}; give the parent runs of two sweeps of the same "
              "configs on two question sets", file=sys.stderr)
        return 2
    try:
        check_sweep_parents(args.sets, args.tracking_uri, "--sets: {} is not a sweep's parent run; give two sweep "
                                                          "parent run ids")
        comparisons = [compare.compare_runs(parent, tracking_uri=args.tracking_uri, test=args.test,
                                            correction=args.correction, alpha=args.alpha) for parent in args.sets]
        metric = (args.metrics or [comparisons[0].headline])[0]
        for parent, comparison in zip(args.sets, comparisons):
            lacking = [r.label for r in comparison.runs if metric not in r.per_query.columns]
            if lacking:
                raise compare.CompareError(f"--sets: the runs of sweep {parent} have no per-query {metric} "
                                           f"({', '.join(lacking[:3])}); give --metric a metric both sets "
                                           "measure, e.g. doc_ndcg_at_10")
        names = set_names(comparisons)
        agreement = compare.sets.compare_sets(*({r.label: r.per_query[metric].to_numpy(dtype=float) for r in c.runs}
                                                for c in comparisons), names=names, metric=metric, test=args.test,
                                              correction=args.correction, alpha=args.alpha)
    except (compare.CompareError, compare.sets.SetsError, tracking.read.RunReadError) as e:
        print(f"kbench: error: {e}", file=sys.stderr)
        return 2
    for line in agreement.lines():
        print(line)
    out = Path(args.out) if args.out else workspace_dir() / "comparisons" / f"sets-{args.sets[0][:8]}-{args.sets[1][:8]}"
    out.mkdir(parents=True, exist_ok=True)
    (out / "sets.json").write_text(json.dumps(agreement.as_dict(), indent=2), encoding="utf-8")
    (out / "sets.txt").write_text("\n".join(agreement.lines()) + "\n", encoding="utf-8")
    print(f"\nwritten: {out / 'sets.txt'} and {out / 'sets.json'}")
    return 0


def set_names(comparisons: list[Comparison]) -> tuple[str, str]:
    """Each sweep's dataset (its children's ``kbench.dataset`` tag); the parent run id when both name the same."""
    client = tracking.read.tracking_client(comparisons[0].tracking_uri)
    names = []
    for comparison in comparisons:
        tags = client.get_run(comparison.runs[0].run_id).data.tags
        names.append(tags.get(tag.DATASET) or comparison.parent_run_id[:8])
    if names[0] == names[1]:
        names = [f"{n} ({c.parent_run_id[:8]})" for n, c in zip(names, comparisons)]
    return names[0], names[1]


def sweep_knobs(comparison) -> tuple[list[dict[str, str]], list[str]]:
    """A sweep's children's ``kbench.knob.*`` tags as the report's "what each config ran" table."""
    client = tracking.read.tracking_client(comparison.tracking_uri)
    named = []
    for run in comparison.runs:
        tags = client.get_run(run.run_id).data.tags
        named.append((run.label, {k[len(tag.KNOB_PREFIX):]: v for k, v in tags.items()
                                  if k.startswith(tag.KNOB_PREFIX)}))
    table = sweep.summary.knob_table(named)
    return table.rows(), [f"`{h}` = `{p}`" for h, p in table.legend.items()]


def print_judged(judged) -> None:
    """Which qrels produced the numbers, and how much of each run's top k now carries a label."""
    print(f"Re-scored from saved rankings with the {judged.judged.describe()}")
    rows = [[r.config, r.run_id[:8], r.logged, r.with_judged,
             f"THIN (< {judged.min_judged:.2f}) †" if r.thin else "ok"] for r in judged.judged_at_k.itertuples()]
    print(format_table(["config", "run", f"judged_at_{judged.k} logged", f"judged_at_{judged.k} with judged", "pool"],
                       rows, numeric=[False, False, True, True, False]))
    if judged.thin:
        print(f"  a THIN pool: more than {1 - judged.min_judged:.0%} of those runs' top {judged.k} documents carry no "
              "label, and the metrics below count them as not relevant")
    print()


def overview_table(comparison, thin: set[str] = frozenset()) -> tuple[list[str], list[list[object]]]:
    """Like ranx's tables: one row per config sorted by the headline metric, one column per metric, the best
    of each column marked * and the configs not told apart from it =; a config in ``thin`` (judged_at_k below the floor)
    marked †."""
    marks = {}
    for metric in comparison.metrics:
        for r in comparison.ranking(metric).itertuples():
            marks[(r.config, metric)] = {"best": " *", "tied": " ="}.get(r.vs_best, "  ")
    means = comparison.wide("mean")
    rows = []
    for r in comparison.ranking().itertuples():
        rows.append([r.rank, r.config + (" (baseline)" if r.baseline else "") + (" †" if r.config in thin else "")]
                    + [f"{means.loc[r.config, m]:.4f}{marks[(r.config, m)]}" for m in comparison.metrics])
    return ["#", "config", *comparison.metrics], rows


def metric_table(comparison, metric: str, test: str, thin: set[str] = frozenset()
                 ) -> tuple[list[str], list[list[object]]]:
    """One metric, best first: mean with its interval, the verdict against the best, and the difference to the
    baseline with its effect size and p-values."""
    table = comparison.table[comparison.table["metric"] == metric].set_index("config")
    rows = []
    for rank in comparison.ranking(metric).itertuples():
        r = table.loc[rank.config]
        vs_best = compare.report.SHORT_VERDICTS[rank.vs_best]
        if rank.vs_best != "best":
            vs_best += f" (p {compare.report.format_p(rank.p_vs_best_adjusted)})"
        rows.append([rank.rank, rank.config + (" (baseline)" if r["baseline"] else "")
                     + (" †" if rank.config in thin else ""), r["mean"], r["ci_low"],
                     r["ci_high"], vs_best, "–" if r["baseline"] else f"{r['diff']:+.4f}",
                     "–" if r["baseline"] else f"{r['effect_size']:.4f}", compare.report.format_p(r[f"p_{test}"]),
                     compare.report.format_p(r["p_adjusted"]), "yes" if r["significant"] else ""])
    return ["#", metric, "mean", "ci_low", "ci_high", "vs best", "Δ baseline", "d", f"p_{test}", "p_adj", "sig"], rows


def print_slice_table(table, key: str, comparison) -> None:
    """The headline metric per slice label and config, with the difference to the baseline and its p-value
    (corrected over every slice, config and metric)."""
    part = table[table["metric"] == comparison.headline]
    rows = [[r.slice, r.config + (" (baseline)" if r.baseline else ""), r.n_queries, r.mean,
             "–" if r.baseline else f"{r.diff:+.4f}", compare.report.format_p(r.p_adjusted), "yes" if r.significant else ""]
            for r in part.itertuples()]
    print(f"{comparison.headline} per {key} ({comparison.correction} correction over {int(table['p_adjusted'].notna().sum())} "
          f"tests in every slice):")
    print(format_table([key, "config", "queries", "mean", "Δ baseline", "p_adj", "sig"], rows,
                       numeric=[False, False, True, True, True, True, False]))


def print_frontier(frontier, metric: str, cost: str, constraints) -> None:
    rows = [[r.config, getattr(r, cost), getattr(r, metric), "*" if r.on_frontier else ""]
            for r in frontier.itertuples()]
    print(f"{metric} against {cost} (* on the Pareto frontier: no config is better and cheaper)")
    print(format_table(["config", cost, metric, "frontier"], rows, numeric=[False, True, True, False]))
    if constraints:
        best = compare.frontier.best_under(frontier, metric, constraints)
        where = " and ".join(str(c) for c in constraints)
        print(f"best under {where}: " + (f"{best['config']} ({metric} {best[metric]:.4f}, {cost} {best[cost]:g})"
                                         if best is not None else "no config meets it"))


def run_export(args) -> int:

    _quiet_mlflow()
    paths = kbench.export_run(args.run_id, args.out, level=args.level, tracking_uri=args.tracking_uri,
                              format=args.format)
    for kind, path in paths.items():
        print(f"{kind}: {path}")
    return 0


def run_import(args) -> int:

    result = kbench.import_trec_run(args.run_file, kbench.load_experiment(args.config), name=args.name,
                                    log=not args.no_log)
    print(f"scored {result.counts['queries']} queries of {result.experiment.dataset.name or result.experiment.dataset.path}")
    for key in sorted(k for k in result.metrics if k.startswith("doc_") and k.endswith(("_at_10", "_at_100"))):
        print(f"  {key} {result.metrics[key]:.4f}")
    print(f"results: {result.run_dir}")
    if result.run_id:
        print(f"MLflow run {result.run_id} in {result.tracking_uri}")
    return 0
