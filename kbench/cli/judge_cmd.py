"""kbench judge RUN... --out QRELS | --calibrate: LLM relevance judgements for the pooled top-k of runs."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from kbench import judging, llm, tracking
from kbench.cli import add_command, seed_number
from kbench.cli.outputs import output_problem
from kbench.cli.tables import format_table
from kbench.judging.prompt import GRADES, PROMPT, PROMPT_SHA256
from kbench.paths import workspace_dir


def add_parser(sub) -> None:
    p = add_command(sub, "judge")
    p.add_argument("runs", nargs="+", metavar="RUN_ID",
                   help="runs on one dataset, or a sweep's parent run id alone (every finished config of the sweep)")
    p.add_argument("--out", help="TREC qrels to write (and <out>.json with the provenance and every judgement)")
    p.add_argument("--k", type=int, default=10, help="pool depth: the top k of each run (default 10)")
    p.add_argument("--calibrate", action="store_true", help="judge a sample of already-labeled pairs and report "
                   "Cohen's kappa and the confusion table (nothing written)")
    p.add_argument("--sample", type=int, default=50, help="--calibrate: pairs to judge, half relevant (default 50)")
    p.add_argument("--seed", type=seed_number, default=0, help="seed of --sample and --max-queries (default 0)")
    p.add_argument("--max-queries", type=int, default=None, metavar="N",
                   help="judge a seeded sample of N pooled questions, each with its whole pool (a CPU judge cannot "
                        "grade a real sweep's pool); judged_at_k is then reported on those questions")
    p.add_argument("--min-usable", type=float, default=None, metavar="F",
                   help="share of answers that must hold a readable grade (default 0.8); below it the judge stops "
                        "with exit 2 and writes nothing")
    p.add_argument("--allow-partial", action="store_true",
                   help="go on below --min-usable: qrels from the usable grades, said loudly and recorded in "
                        "<out>.json (\"partial\": true)")
    p.add_argument("--max-retries", type=int, default=None, metavar="N",
                   help="retries of a failed or timed-out request (default 5)")
    p.add_argument("--base-url", help="an OpenAI-compatible endpoint (default OPENAI_BASE_URL; `kbench serve`)")
    p.add_argument("--model", help="the judge's chat model")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY", help="the variable holding the key")
    p.add_argument("--workspace", default="experiments", help="judgements are cached under WORKSPACE/cache/llm")
    p.add_argument("--timeout-s", type=float, default=None, metavar="S",
                   help="seconds to wait for one answer (default 60; a small model on a busy CPU needs more)")
    p.add_argument("--concurrency", type=int, default=None, metavar="N",
                   help="requests in flight (default 4; `kbench serve` answers one at a time, so 1 there)")
    p.add_argument("--tracking-uri", help="MLflow store (default: MLFLOW_TRACKING_URI or experiments/mlflow.db)")
    p.set_defaults(func=run_judge)


def run_judge(args) -> int:
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # one bar per run read: noise
    if not args.calibrate and not args.out:
        print("kbench: error: give --out QRELS (or --calibrate to measure the judge first)", file=sys.stderr)
        return 2
    if not args.calibrate and (problem := output_problem(args.out, "--out")):  # before any pair is judged
        print(f"kbench: error: {problem}", file=sys.stderr)
        return 2
    if args.k < 1 or args.sample < 2:
        print("kbench: error: --k must be >= 1 and --sample >= 2", file=sys.stderr)
        return 2
    if (args.timeout_s is not None and args.timeout_s <= 0) or (args.concurrency is not None and args.concurrency < 1):
        print("kbench: error: --timeout-s must be > 0 and --concurrency >= 1", file=sys.stderr)
        return 2
    if args.max_queries is not None and args.max_queries < 1:
        print("kbench: error: --max-queries must be >= 1", file=sys.stderr)
        return 2
    if (args.min_usable is not None and not 0 <= args.min_usable <= 1) or (args.max_retries or 0) < 0:
        print("kbench: error: --min-usable is a share between 0 and 1; --max-retries >= 0", file=sys.stderr)
        return 2
    policy = llm.LLMPolicy(**{k: v for k, v in (("timeout_s", args.timeout_s), ("concurrency", args.concurrency),
                                                ("min_usable", args.min_usable), ("max_retries", args.max_retries))
                              if v is not None}, allow_partial=args.allow_partial)
    endpoint = llm.Endpoint("judge", args.base_url, args.model, args.api_key_env, base_url_option="--base-url")
    with llm.LLMClient(endpoint, stage="judge", policy=policy, cache_root=workspace_dir(args.workspace) / "cache",
                       cache_params={"prompt_sha256": PROMPT_SHA256}) as client:
        client.check_endpoint()  # before the runs are read and pooled: a dead port is one line in seconds
        if args.calibrate:
            return print_calibration(judging.calibrate(args.runs, client, k=args.k, sample=args.sample,
                                                       seed=args.seed, tracking_uri=args.tracking_uri))
        report = judging.judge_runs(args.runs, client, k=args.k, out=Path(args.out), tracking_uri=args.tracking_uri,
                                    max_queries=args.max_queries, seed=args.seed)
    sample = f" (a seeded sample of {report.questions} questions, --max-queries)" if report.sampled else ""
    print(f"pooled {report.pooled} (query, chunk) pairs from the top {args.k} of {len(report.runs)} runs{sample}; "
          f"{report.labeled} already labeled; judged {report.judged} ({report.cache_hits} from the cache), "
          f"{report.unparsed} answers unparsed")
    if report.partial:
        print(f"WARNING: --allow-partial: only {report.judged} of {report.judged + report.unparsed} answers held a "
              "grade; the qrels rest on those (\"partial\": true in the provenance)")
    print("grades: " + ", ".join(f"{g}: {n}" for g, n in report.grades.items()))
    print(tracking.mlflow_feedback.log_judge_feedback(f"{args.out}.json", args.tracking_uri, meanings=GRADES,
                                                      prompt_template=PROMPT).summary())
    rows = [[name, f"{report.judged_at_k_before[name]:.4f}", f"{report.judged_at_k_after[name]:.4f}"]
            for name in report.judged_at_k_before]
    print(format_table(["run", f"judged_at_{args.k} before", "after"], rows))
    print(f"wrote {args.out} and {args.out}.json; use it with --set dataset.judged_qrels={args.out} "
          "(dataset.judged_qrels_use: beside | instead)")
    return 0


def print_calibration(c) -> int:
    print(f"calibration on {c.n} labeled pairs ({c.unparsed} answers unparsed): Cohen's kappa {c.kappa:.4f}, "
          f"agreement {c.agreement:.1%} (judge grade >= 2 = relevant)")
    rows = [[f"label {gold}", *map(str, c.table[gold])] for gold in (0, 1)]
    print(format_table(["", "judge 0", "judge 1", "judge 2", "judge 3"], rows))
    return 0
