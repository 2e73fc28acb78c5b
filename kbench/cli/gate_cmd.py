"""kbench gate BASELINE CANDIDATE: exit 1 when the candidate is significantly worse by more than a margin."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import kbench
from kbench import compare
from kbench.cli import add_command
from kbench.cli.outputs import output_problem
from kbench.evaluation.significance import CORRECTIONS, TESTS


def add_parser(sub) -> None:
    p = add_command(sub, "gate")
    p.add_argument("baseline", metavar="BASELINE", help="a config file (.yaml: run now, or its finished run read back) "
                                                         "or a logged run id")
    p.add_argument("candidate", metavar="CANDIDATE", help="a config file or a logged run id")
    p.add_argument("--metric", dest="metrics", action="append", metavar="NAME",
                   help="per-query metric to gate on, repeatable (default: the headline metric, nDCG@10 of the "
                        "finest level)")
    p.add_argument("--margin", type=float, default=0.01,
                   help="how much worse is tolerated, in the metric's units (default 0.01)")
    p.add_argument("--test", choices=list(TESTS), default="randomization")
    p.add_argument("--correction", choices=[*CORRECTIONS, "none"], default="holm",
                   help="over the gated metrics (default holm)")
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--allow-dataset-change", action="store_true",
                   help="compare runs whose dataset hashes differ (refused by default)")
    p.add_argument("--no-reuse", action="store_true", help="run config files even when a finished run matches")
    p.add_argument("--tracking-uri", help="MLflow store of run ids (default: MLFLOW_TRACKING_URI or "
                                          "experiments/mlflow.db)")
    p.add_argument("--json", metavar="PATH", help="also write the verdict as JSON here ('-' for stdout instead of "
                                                  "the markdown)")
    p.add_argument("--summary", metavar="PATH", help="append the markdown summary to this file (in GitHub Actions: "
                                                     "$GITHUB_STEP_SUMMARY)")
    p.set_defaults(func=run_gate)


def metric_problem(metrics: list[str] | None, specs: tuple[str, str]) -> str | None:
    """A ``--metric`` that a config side's runs would not score, found from its evaluation section before it runs
    (a run id side is read, and checked, in seconds)."""
    for spec in specs:
        if not metrics or not spec.endswith(compare.gate.CONFIG_SUFFIXES) or not Path(spec).is_file():
            continue
        experiment = kbench.load_experiment(spec)
        scored = experiment.evaluation.metric_columns() + [f"latency_ms_{s}" for s in experiment.latency_stages()]
        missing = [m for m in metrics if m not in scored]
        if missing:
            return (f"--metric {', '.join(missing)}: a run of {spec} scores no such per-query metric; it scores "
                    f"{experiment.evaluation.metric_forms()}, latency_ms_<stage>")
    return None


def run_gate(args) -> int:
    say = lambda s: print(f"kbench gate: {s}", file=sys.stderr)  # noqa: E731 (progress on stderr, results on stdout)
    problem = (compare.gate.option_problem(args.margin, args.alpha, args.test) or output_problem(args.json, "--json", True)
               or output_problem(args.summary, "--summary") or metric_problem(args.metrics, (args.baseline, args.candidate)))
    if problem:  # before either side runs: a run is minutes, a typo is not worth them
        print(f"kbench: error: {problem}", file=sys.stderr)
        return 2
    sides = [compare.gate.resolve_side(spec, tracking_uri=args.tracking_uri, reuse=not args.no_reuse, say=say)
             for spec in (args.baseline, args.candidate)]
    result = compare.gate.gate(*sides, metrics=args.metrics, margin=args.margin, test=args.test,
                  correction=args.correction, alpha=args.alpha, allow_dataset_change=args.allow_dataset_change)
    verdict = json.dumps(result.as_dict(), indent=2)
    if args.json == "-":
        print(verdict)
    else:
        print(result.markdown())
        if args.json:
            Path(args.json).write_text(verdict + "\n", encoding="utf-8")
    if args.summary:
        with open(args.summary, "a", encoding="utf-8") as f:
            f.write(result.markdown())
    return result.exit_code
