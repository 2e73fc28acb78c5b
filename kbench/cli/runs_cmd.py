"""kbench runs [--experiment NAME] [--limit N]; kbench runs show RUN_ID [--misses] [--limit N];
kbench runs export-mlflow RUN_FOLDER [--tracking-uri URI]; kbench runs mlflow-judge RUN_ID --model M [--base-url URL]

``kbench runs`` lists the newest logged runs with their headline metrics (nDCG, recall and MRR at 10 of the
finest level scored). ``kbench runs show`` prints one run: its config in short, its metrics per level and k,
how many queries it missed; with ``--misses`` each missed query, its reference text and what the run returned
instead, rebuilt from the run's logged config (kbench.compare.misses: a miss is a query whose recall at the
headline's level and k is 0). ``kbench runs export-mlflow`` writes a run folder to an MLflow store (the run, its
dataset input, traces, expectations and prompts: kbench.tracking.mlflow_export), adding only what is missing;
``kbench runs mlflow-judge`` runs MLflow's retrieval judges over a run's traces (kbench.tracking.mlflow_judges).
"""
from __future__ import annotations

import os
import re
import sys
from datetime import datetime
from pathlib import Path

from kbench import compare, llm, tracking
from kbench.cli import add_command
from kbench.cli.tables import format_table, metrics_table
from kbench.judging.prompt import GRADES, PROMPT
from kbench.paths import workspace_dir
from kbench.tracking import tags as tag

MEASURE_NAMES = {"ndcg": "nDCG", "recall": "recall", "mrr": "MRR"}


def add_parser(sub) -> None:
    p = add_command(sub, "runs")
    p.add_argument("--experiment", metavar="NAME", help="only this MLflow experiment (default: every experiment)")
    p.add_argument("--limit", type=int, default=20, metavar="N", help="newest N runs (default 20)")
    p.add_argument("--sweeps", action="store_true", help="only sweep parent runs (what `kbench compare --sweep` takes)")
    p.add_argument("--ids", action="store_true", help="print only the run ids, newest first, one a line (for scripts: "
                   "RUN=$(kbench runs --ids --limit 1))")
    p.add_argument("--tracking-uri", help="MLflow store (default: MLFLOW_TRACKING_URI or <workspace>/mlflow.db)")
    p.set_defaults(func=list_runs)
    runs_sub = p.add_subparsers(dest="runs_command", metavar="show | export-mlflow | mlflow-judge")
    s = runs_sub.add_parser("show", help="one run: config, metrics, misses (--misses: each missed question)")
    s.add_argument("run_id", metavar="RUN_ID", help="a run id, or its first characters as `kbench runs` prints them")
    s.add_argument("--misses", action="store_true",
                   help="the questions the run missed, their reference text and what it returned instead")
    s.add_argument("--limit", type=int, default=10, metavar="N", help="misses to print (default 10)")
    s.add_argument("--k", type=int, metavar="K", help="judge misses at this k (default: the headline's, 10)")
    s.add_argument("--tracking-uri", help="MLflow store (default: MLFLOW_TRACKING_URI or <workspace>/mlflow.db)")
    s.set_defaults(func=show_run)
    x = runs_sub.add_parser("export-mlflow", help="export a run folder to an MLflow store: the run, its dataset input, "
                            "one trace per question with its labels, its prompts (again: only what is missing)")
    x.add_argument("run_folder", metavar="RUN_FOLDER", help="a folder under <workspace>/runs/")
    x.add_argument("--tracking-uri", help="MLflow store (default: MLFLOW_TRACKING_URI or the folder's workspace's "
                   "mlflow.db)")
    x.add_argument("--experiment", help="MLflow experiment (default: the run's tracking.experiment)")
    x.add_argument("--judgements", metavar="QRELS_JSON", help="also attach `kbench judge` grades (its <out>.json) to "
                   "the exported run's traces as Feedback")
    x.set_defaults(func=export_mlflow)
    j = runs_sub.add_parser("mlflow-judge", help="run MLflow's retrieval judges (RetrievalRelevance, "
                            "RetrievalSufficiency) over a run's traces with an OpenAI-compatible judge; results "
                            "logged into the run")
    j.add_argument("run_id", metavar="RUN_ID", help="a run id, or its first characters as `kbench runs` prints them")
    j.add_argument("--model", required=True, help="the judge's chat model at the endpoint")
    j.add_argument("--base-url", help="an OpenAI-compatible /v1 endpoint (default OPENAI_BASE_URL; `kbench serve` "
                   "prints one)")
    j.add_argument("--api-key-env", default="OPENAI_API_KEY", help="the variable holding the key (a local endpoint "
                   "needs none)")
    j.add_argument("--scorers", nargs="+", choices=["relevance", "sufficiency"], default=["relevance", "sufficiency"],
                   help="MLflow scorers to run (sufficiency needs reference texts: span datasets)")
    j.add_argument("--max-traces", type=int, default=None, metavar="N", help="judge the first N questions only "
                   "(each document of a question's ranking is one request for relevance)")
    j.add_argument("--concurrency", type=int, default=4, metavar="N",
                   help="requests in flight (default 4; `kbench serve` answers one at a time, so 1 there)")
    j.add_argument("--max-tokens", type=int, default=None, metavar="N", help="cap each relevance answer (a small "
                   "local model rambles)")
    j.add_argument("--timeout-s", type=float, default=None, metavar="S", help="seconds to wait for one answer "
                   "(default 60; a small model on a busy CPU needs more)")
    j.add_argument("--min-usable", type=float, default=None, metavar="F",
                   help="share of answers that must hold a verdict (default 0.8); below it the command stops with "
                        "exit 2 and logs nothing into the run")
    j.add_argument("--allow-partial", action="store_true",
                   help="log below --min-usable anyway, said loudly, the run tagged kbench.llm.partial")
    j.add_argument("--tracking-uri", help="MLflow store (default: MLFLOW_TRACKING_URI or <workspace>/mlflow.db)")
    j.set_defaults(func=mlflow_judge)


def _quiet() -> None:
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")


def _open_store(uri: str | None):
    """The tracking client, or None when the default sqlite store was never created (nothing logged yet)."""
    resolved = uri or os.environ.get("MLFLOW_TRACKING_URI")
    if resolved is None:  # the default store: <workspace>/mlflow.db, as tracking_client builds it
        if not (workspace_dir() / "mlflow.db").exists():
            return None, str(workspace_dir() / "mlflow.db")
    client = tracking.read.tracking_client(uri)
    return client, str(client.tracking_uri)


def _started(ms: int | None, seconds: bool = False) -> str:
    if not ms:
        return "?"
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")


def _short(text: str, limit: int) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _note(run) -> str:
    tags = run.data.tags
    if run.info.status == "FAILED" and tags.get(tag.ERROR):
        return "error: " + _short(tags[tag.ERROR], 60)
    if tags.get(tag.SWEEP_ROLE) == "parent":
        winner = tags.get(tag.SWEEP_WINNER)  # the recommended config
        return f"sweep of {tags.get(tag.SWEEP_CONFIGS, '?')} configs" + (f", recommended {winner}" if winner else "")
    if tags.get(tag.SWEEP_ROLE) == "child":
        reused = tags.get(tag.SWEEP_REUSED_FROM)
        return f"sweep {tags.get('mlflow.parentRunId', '?')[:12]}" + (f", reuses {reused[:12]}" if reused else "")
    if tags.get(tag.IMPORTED_FROM):
        return "TREC import " + Path(tags[tag.IMPORTED_FROM]).name
    return ""


def list_runs(args) -> int:
    _quiet()
    if args.limit < 1:
        print("kbench: error: --limit must be at least 1", file=sys.stderr)
        return 2
    client, uri = _open_store(args.tracking_uri)
    runs = tracking.read.recent_runs(client, args.experiment, args.limit, args.sweeps) if client is not None else []
    if args.ids:
        print("\n".join(run.info.run_id for run in runs))
        return 0
    if not runs:
        print(f"no runs in {uri} yet; log one with: kbench run configs/quickstart.yaml")
        return 0
    names = tracking.read.experiment_names(client)
    rows = []
    for run in runs:
        metrics = run.data.metrics
        found = compare.compare.metrics_to_compare(metrics)
        at = {name.split("_")[1]: metrics[name] for name in found}
        level_k = f"{found[0].split('_')[0]}@{found[0].rsplit('_', 1)[1]}" if found else ""
        queries = metrics.get("count_queries")
        rows.append([run.info.run_id[:12], _started(run.info.start_time), names.get(run.info.experiment_id, "?"),
                     _short(run.data.tags.get(tag.SWEEP_LABEL) or run.data.tags.get("mlflow.runName", ""), 56),
                     run.info.status, level_k,
                     *(at.get(m, "") for m in MEASURE_NAMES),
                     int(queries) if queries is not None else "", _note(run)])
    headers = ["run", "started", "experiment", "name (sweep configs: label)", "status", "at", *MEASURE_NAMES.values(),
               "queries", "note"]
    print(format_table(headers, rows, numeric=[False] * 6 + [True] * 4 + [False]))
    print(f"\n{len(runs)} newest runs in {uri}; one run: kbench runs show RUN [--misses]")
    return 0


def _config_lines(params: dict[str, str]) -> list[str]:
    # fusion.method / rerank.method: what runs logged before these keys were named strategy
    def section(prefix: str, keys: list[str] | None = None) -> str:
        items = [(k.removeprefix(prefix), v) for k, v in params.items() if k.startswith(prefix) and v != "null"
                 and (keys is None or k.removeprefix(prefix) in keys)]
        return " ".join(f"{k}={v}" for k, v in items)

    lines = [("dataset", section("dataset.", ["name", "path", "max_documents", "max_queries", "seed"])),
             ("chunking", section("chunking.")),
             ("embedding", section("embedding.", ["model", "dimension"])),
             ("retrieval", section("retrieval.", ["legs", "fusion.strategy", "fusion.method", "top_k",
                                                   "candidates_per_leg"]))]
    if params.get("rerank.enabled") == "true":
        lines.append(("rerank", section("rerank.", ["strategy", "method", "model", "top_k"])))
    return [f"  {name:<10} {_short(text, 110)}" for name, text in lines if text]


def show_run(args) -> int:
    _quiet()
    client, uri = _open_store(args.tracking_uri)
    if client is None:
        raise tracking.read.RunReadError(f"run {args.run_id!r} not found: no MLflow store at {uri} (pass --tracking-uri)")
    run = tracking.read.find_run(client, args.run_id)
    tags, metrics = run.data.tags, run.data.metrics
    info = run.info
    stages = {k.removeprefix("time_s_"): v for k, v in metrics.items() if k.startswith("time_s_")}
    took = f", computed in {sum(stages.values()):.1f}s" if stages else ""
    print(f"run {info.run_id}: {tags.get('mlflow.runName', '')}")
    print(f"  {info.status}, started {_started(info.start_time, seconds=True)}{took}; experiment "
          f"{tracking.read.experiment_names(client).get(info.experiment_id, '?')} in {uri}")
    if tags.get(tag.ERROR):
        print(f"  error: {_short(tags[tag.ERROR], 300)}")
    counts = {k.removeprefix("count_"): int(v) for k, v in metrics.items() if k.startswith("count_")}
    if counts:
        print(f"  dataset {tags.get(tag.DATASET, '?')}: " + ", ".join(
            f"{counts[k]} {k}" for k in ("queries", "documents", "chunks") if k in counts))
    if tags.get(tag.SWEEP_ROLE) == "parent":
        decided = {"true": "", "false": ", provisional: the questions cannot decide"}.get(
            tags.get(tag.SWEEP_DECIDED, ""), "")
        print(f"  sweep of {tags.get(tag.SWEEP_CONFIGS, '?')} configs; recommended {tags.get(tag.SWEEP_WINNER, '?')} "
              f"(run {tags.get(tag.SWEEP_WINNER_RUN, '?')}{decided}) on {tags.get(tag.SWEEP_HEADLINE, '?')}; "
              "its metrics below, its config in artifact winner.yaml")
        print(f"  every config: kbench compare --sweep {info.run_id} --tracking-uri {uri}")
    elif tags.get(tag.SWEEP_ROLE) == "child":
        print(f"  sweep config {tags.get(tag.SWEEP_LABEL, '?')} of parent run {tags.get('mlflow.parentRunId', '?')}"
              + (f"; results of run {tags[tag.SWEEP_REUSED_FROM]} (same config)" if tags.get(tag.SWEEP_REUSED_FROM)
                 else ""))
    if stages:
        print("  stage wall time: " + ", ".join(f"{k} {v:.1f}s" for k, v in stages.items()))
    print()
    for line in _config_lines(run.data.params):
        print(line)
    for level in ("doc", "chunk", "span"):
        table = metrics_table(metrics, level)
        if table:
            print()
            print(table)
    if tags.get(tag.SWEEP_ROLE) == "parent" or info.status != "FINISHED":
        return 0
    print()
    if not args.misses:
        per_query, _ = tracking.read.read_per_query(client, run)
        metric, _, k = compare.misses.miss_metric(per_query, args.k)
        n = int((per_query[metric] == 0).sum())
        print(f"misses: {n} of {len(per_query)} queries have {metric} = 0 (nothing relevant in the top {k}); "
              f"read them: kbench runs show {info.run_id[:12]} --misses")
        return 0
    print_misses(compare.misses.read_misses(info.run_id, tracking_uri=uri, k=args.k), args.limit)
    return 0


def print_misses(found, limit: int) -> None:
    print(f"misses: {len(found.misses)} of {found.n_queries} queries ({found.definition})"
          + (f"; {found.n_without_reference} queries have nothing to find" if found.n_without_reference else ""))
    for note in found.notes:
        print(f"note: {note}")
    for miss in found.misses[:limit]:
        print()
        print(f"{miss.query_id}  {_short(miss.question, 150) or '(question not in the dataset)'}")
        for n, ref in enumerate(miss.references):
            label = "expected" if n == 0 else ""
            where = (f"{ref.doc_id} [{ref.start}:{ref.end}]" if ref.start is not None
                     else f"{ref.doc_id} (grade {ref.grade})")
            detail = ""
            if ref.covered is not None:
                first = (f"first hit at rank {ref.hit_rank}" if ref.hit_rank else
                         f"no hit in the top {found.k}" if ref.hit_rank is not None else "")
                detail = f"  ({', '.join(x for x in (first, f'{ref.covered:.0%} of it retrieved') if x)})"
            print(f"  {label:<9} {where}{detail}")
            print(f"  {'':<9} \"{_short(ref.text, 220)}\"")
        if not miss.references:
            print("  expected  (no reference found in the rebuilt dataset)")
        for n, hit in enumerate(miss.returned):
            label = "returned" if n == 0 else ""
            print(f"  {label:<9} {hit.rank}. {hit.chunk_id} (score {hit.score:.4f}) \"{_short(hit.text, 140)}\"")
    if len(found.misses) > limit:
        print(f"\n... and {len(found.misses) - limit} more (--limit N to see them)")


def export_mlflow(args) -> int:
    _quiet()
    if args.judgements:  # a file that is not `kbench judge`'s is refused before anything is exported
        tracking.mlflow_feedback.read_judgements(args.judgements)
    report = tracking.mlflow_export.export_run_folder(args.run_folder, args.tracking_uri, args.experiment)
    traces = report.traces
    print(f"{'exported' if report.created else 'found'} run {report.run_id} in {report.tracking_uri}")
    print(f"  dataset input: {'logged' if report.dataset_input else 'already there (or no dataset.json)'}; traces: "
          f"{traces.counted()} ({traces.logged} question traces written, {traces.existing} already there); "
          f"expectations: {traces.expectations}; prompts: {', '.join(report.prompts) or 'none'}")
    if args.judgements:
        print(tracking.mlflow_feedback.log_judge_feedback(args.judgements, report.tracking_uri, meanings=GRADES,
                                                          prompt_template=PROMPT, run_ids=[report.run_id]).summary())
    return 0


def mlflow_judge(args) -> int:
    _quiet()
    if (args.max_traces is not None and args.max_traces < 1) or args.concurrency < 1:
        print("kbench: error: --max-traces and --concurrency must be at least 1", file=sys.stderr)
        return 2
    if (args.timeout_s is not None and args.timeout_s <= 0) or (
            args.min_usable is not None and not 0 <= args.min_usable <= 1):
        print("kbench: error: --timeout-s must be > 0 and --min-usable a share between 0 and 1", file=sys.stderr)
        return 2
    policy = llm.LLMPolicy(**{k: v for k, v in (("timeout_s", args.timeout_s), ("min_usable", args.min_usable))
                              if v is not None}, concurrency=args.concurrency, allow_partial=args.allow_partial)
    try:
        result = tracking.mlflow_judges.run_mlflow_judges(
            args.run_id, model=args.model, base_url=args.base_url, api_key_env=args.api_key_env,
            scorers=args.scorers, max_traces=args.max_traces, concurrency=args.concurrency,
            max_tokens=args.max_tokens, timeout_s=args.timeout_s, tracking_uri=args.tracking_uri, policy=policy)
    except KeyboardInterrupt:  # the judges' threads are daemons: nothing waits for their requests
        print(f"kbench: stopped (Ctrl-C); run {args.run_id} keeps its status (judgements are logged only once "
              "every answer is in)", file=sys.stderr)
        return 130
    for note in result.notes:
        print(f"note: {note}")
    if result.partial:
        print("WARNING: --allow-partial: logged below --min-usable; the run is tagged kbench.llm.partial")
    print(f"MLflow judges on {result.traces} traces of run {result.run_id}: {result.feedback} assessments, "
          f"{result.errors} of them errors (the judge's answer unusable)")
    rows = [[name, f"{value:.4f}"] for name, value in sorted(result.metrics.items())]
    if rows:
        print(format_table(["metric (logged into the run)", "value"], rows))
    return 0
