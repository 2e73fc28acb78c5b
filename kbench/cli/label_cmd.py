"""kbench label --sweep PARENT | RUN... | --pool FILE: label the pairs that decide the top configs on a local page;
PPI++ intervals from the human and the model's grades (--report); Label Studio export and import."""
from __future__ import annotations

import hashlib
import os
import signal
import sys
from pathlib import Path

from kbench import compare, labelling, tracking
from kbench.cli import add_command
from kbench.cli.console import serve_until_interrupted
from kbench.cli.outputs import output_problem
from kbench.evaluation.config import RecommendConfig
from kbench.paths import workspace_dir
from kbench.ports import bind_fix, port_problem
from kbench.tracking import tags as tag

SUFFIX = ".pool.json"


def add_parser(sub) -> None:
    p = add_command(sub, "label")
    p.add_argument("runs", nargs="*", metavar="RUN_ID", help="runs on one dataset (or give --sweep or --pool)")
    p.add_argument("--sweep", metavar="PARENT", help="a sweep's parent run id: its finished configs")
    p.add_argument("--pool", metavar="FILE", help="a pool file (LABELS.pool.json) to go on with, without MLflow")
    p.add_argument("--labels", metavar="FILE", help="the labels file (TREC qrels, appended; default "
                   "WORKSPACE/labels/<sweep or runs>.qrels); LABELS.provenance.jsonl and LABELS.pool.json beside it")
    p.add_argument("--judged", metavar="QRELS", help="the model's grades: a `kbench judge --out` file (its .json); "
                   "default: the dataset's own labels (a generated set's)")
    p.add_argument("--judge-model", metavar="NAME", help="a trained judge (kbench judge RUN... --train NAME) grades "
                   "every pair too: --report shows its kappa beside the other model's, and PPI++ uses the one that "
                   "agrees best with the humans")
    p.add_argument("--k", type=int, default=10, help="pool depth: the top k of each contender (default 10)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random share and the order's ties (default 0)")
    p.add_argument("--random-share", type=float, default=0.8, metavar="F",
                   help="share of the labels that go to whole random questions, PPI's labelled set (default 0.8; 1: "
                        "random questions only)")
    p.add_argument("--scale", choices=["graded", "binary"], default="graded",
                   help="graded: 0-3, the judge's scale (default); binary: 0 not relevant, 1 relevant")
    p.add_argument("--margin", default=None, help="the recommendation's margin (default: the recommend section's, "
                   "0.01; '2%%' for a share)")
    p.add_argument("--annotator", help="who labels (default: the OS user); kept with every grade")
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default 0: a free port, printed)")
    p.add_argument("--report", action="store_true", help="do not serve: print the intervals and the recommendation "
                   "from the labels so far, and log them to MLflow (unless --no-mlflow)")
    p.add_argument("--no-mlflow", action="store_true", help="--report: print only")
    p.add_argument("--export-label-studio", metavar="DIR", help="do not serve: write the unlabelled pairs, in order, as "
                   "Label Studio tasks (DIR/tasks.json) and its labelling config (DIR/config.xml)")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="--export-label-studio: the first N pairs")
    p.add_argument("--import-label-studio", metavar="EXPORT", help="do not serve: add the annotations of a Label "
                   "Studio JSON export to the labels file")
    p.add_argument("--tracking-uri", help="MLflow store (default: MLFLOW_TRACKING_URI or experiments/mlflow.db)")
    p.add_argument("--workspace", default="experiments", help="the default labels file goes under WORKSPACE/labels")
    p.set_defaults(func=run_label)


def _problem(args) -> str | None:
    sources = sum([bool(args.runs), bool(args.sweep), bool(args.pool)])
    if sources != 1:
        return "give the runs to label for: RUN_ID... (two or more), --sweep PARENT, or --pool FILE (one of them)"
    if args.k < 1:
        return f"--k {args.k}: the pool depth is at least 1"
    if not 0 < args.random_share <= 1:
        return f"--random-share {args.random_share}: a share above 0 and at most 1 (PPI needs a random share)"
    if port_problem(args.port):
        return port_problem(args.port)
    if args.limit is not None and args.limit < 1:
        return f"--limit {args.limit}: at least 1"
    if sum([args.report, bool(args.export_label_studio), bool(args.import_label_studio)]) > 1:
        return "--report, --export-label-studio and --import-label-studio are separate steps: give one at a time"
    if args.pool and not args.pool.endswith(SUFFIX) and not args.labels:
        return f"--pool {args.pool}: a pool file ends in {SUFFIX} (or give --labels too)"
    return None


def default_labels(args) -> Path:
    if args.pool:
        return Path(args.pool[: -len(SUFFIX)])
    name = f"sweep-{args.sweep[:12]}" if args.sweep else \
        "runs-" + hashlib.sha256(" ".join(sorted(args.runs)).encode()).hexdigest()[:12]
    return workspace_dir(args.workspace) / "labels" / f"{name}.qrels"


def run_label(args) -> int:
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    if problem := _problem(args):
        print(f"kbench: error: {problem}", file=sys.stderr)
        return 2

    labels_path = Path(args.labels).expanduser() if args.labels else default_labels(args)
    if not args.labels:
        labels_path.parent.mkdir(parents=True, exist_ok=True)
    if problem := output_problem(str(labels_path), "--labels"):
        print(f"kbench: error: {problem}", file=sys.stderr)
        return 2
    config = compare.recommendation.with_flags(RecommendConfig(), "--margin", margin=args.margin)
    if args.pool:
        pool = labelling.LabelPool.read(Path(args.pool).expanduser())
    else:
        if args.sweep:
            _check_sweep(args.sweep, args.tracking_uri)
        pool = labelling.build_pool([args.sweep] if args.sweep else args.runs, k=args.k, seed=args.seed,
                                    judged=Path(args.judged).expanduser() if args.judged else None,
                                    random_share=args.random_share, scale=args.scale,
                                    tracking_uri=args.tracking_uri, recommend_config=config,
                                    judge_model=args.judge_model, workspace=args.workspace)
    labels = labelling.LabelsFile.open(labels_path, pool, args.annotator)
    if args.export_label_studio:
        tasks_file, config_file, count = labelling.write_tasks(labels, Path(args.export_label_studio), args.limit)
        print(f"wrote {count} Label Studio tasks ({tasks_file}) and the labelling config ({config_file}): create a "
              "project with that config, import the tasks, label in order, export as JSON, then "
              f"kbench label --pool {labels_path}{SUFFIX} --import-label-studio EXPORT.json")
        return 0
    if args.import_label_studio:
        with labelling.LabelsLock(labels_path, "importing Label Studio annotations") as lock:
            if lock.note:
                print(lock.note, file=sys.stderr)
            print(labelling.import_annotations(labels, Path(args.import_label_studio)).summary())
        print(f"labels: {labels_path} ({labels.count} grades)")
        return 0
    if args.report:
        return report(labels, config, args)
    return serve(labels, args.port)


def _check_sweep(run_id: str, tracking_uri: str | None) -> None:
    try:
        run = tracking.read.find_run(tracking.read.tracking_client(tracking_uri), run_id)
    except tracking.read.RunReadError as e:
        raise labelling.LabelError(f"--sweep {run_id}: {e}") from None
    if run.data.tags.get(tag.SWEEP_ROLE) != "parent":
        raise labelling.LabelError(f"--sweep {run_id}: not a sweep's parent run (give its run ids as RUN_ID... "
                                   "instead)")


def report(labels, config, args) -> int:
    found = labelling.labels_estimate(labels, config)
    print("\n".join(found.lines()))
    if not args.no_mlflow and labels.count:
        kappa = found.agreement.kappa if found.agreement is not None else None
        print(tracking.mlflow_labels.log_human_labels(labels.path, args.tracking_uri, kappa=kappa,
                                                      grades=labels.graded_events()).summary())
    return 0


def serve(labels, port: int) -> int:
    try:
        running = labelling.start_page(labels, port, background=False,
                                       log=lambda line: print(line, file=sys.stderr, flush=True))
    except OSError as e:
        fix = bind_fix(e, "another kbench label or server")
        if fix is None:
            raise
        raise labelling.LabelError(f"--port {port}: {fix}") from None

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # a browser that hangs up must not end the server
    signal.signal(signal.SIGTERM, stop)  # a stop from outside (kill, a test) still prints the estimate
    print(f"kbench label: {running.url} ({len(labels.pool.pairs)} pairs of {len(labels.pool.questions)} questions, "
          f"{labels.count} graded; labels: {labels.path}); Ctrl-C stops", flush=True)
    try:
        serve_until_interrupted(running.server)
    finally:
        running.close()
    print("\n".join(labelling.estimate_lines(labels)))
    print(f"kbench label: stopped; {labels.count} grades in {labels.path} (`kbench label --pool "
          f"{labels.path}{SUFFIX} --report` logs them to MLflow)", flush=True)
    return 0
