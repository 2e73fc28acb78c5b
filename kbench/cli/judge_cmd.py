"""kbench judge RUN... --out QRELS | --calibrate [--labels LABELS] | --train NAME: relevance judgements for the pooled
top-k of runs, by an LLM or a trained judge (a cross-encoder trained on a generated set's pairs)."""
from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from kbench import judging, labelling, llm, tracking
from kbench.cli import add_command, seed_number
from kbench.cli.outputs import output_problem
from kbench.cli.tables import format_table
from kbench.judging.prompt import GRADES, PROMPT, PROMPT_SHA256
from kbench.paths import workspace_dir


def add_parser(sub) -> None:
    p = add_command(sub, "judge")
    p.add_argument("runs", nargs="*", metavar="RUN_ID",
                   help="runs on one dataset, or a sweep's parent run id alone (every finished config of the sweep)")
    p.add_argument("--out", help="TREC qrels to write (and <out>.json with the provenance and every judgement)")
    p.add_argument("--k", type=int, default=10, help="pool depth: the top k of each run (default 10)")
    p.add_argument("--calibrate", action="store_true", help="judge a sample of already-labeled pairs and report "
                   "Cohen's kappa and the confusion table (nothing written); every judge given, side by side")
    p.add_argument("--labels", metavar="LABELS", help="--calibrate: measure against a person's grades (a `kbench "
                   "label` labels file; grade >= 2 relevant on a 0-3 page) instead of the dataset's labels (no runs "
                   "needed)")
    p.add_argument("--judge-model", metavar="NAME", help="a trained judge (kbench judge RUN... --train NAME) instead "
                   "of an LLM; with --calibrate beside the LLM when --model is given too")
    p.add_argument("--train", metavar="NAME", help="train a judge on the runs (a sweep on a generated set: its labels, "
                   "hard negatives from their pools) and save it under the models folder as NAME")
    p.add_argument("--negatives", type=int, default=3, metavar="N", help="--train: hard negatives per question "
                   "(default 3)")
    p.add_argument("--max-pairs", type=int, default=400, metavar="N", help="--train: at most N training pairs "
                   "(default 400: about a minute on 2 CPU cores)")
    p.add_argument("--epochs", type=int, default=1, metavar="N", help="--train: passes over the pairs (default 1)")
    p.add_argument("--force", action="store_true", help="--train: replace a judge of the same name")
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
    p.add_argument("--workspace", default="experiments", help="judgements are cached under WORKSPACE/cache/llm (a "
                   "trained judge's embeddings under WORKSPACE/cache)")
    p.add_argument("--timeout-s", type=float, default=None, metavar="S",
                   help="seconds to wait for one answer (default 60; a small model on a busy CPU needs more)")
    p.add_argument("--concurrency", type=int, default=None, metavar="N",
                   help="requests in flight (default 4; `kbench serve` answers one at a time, so 1 there)")
    p.add_argument("--tracking-uri", help="MLflow store (default: MLFLOW_TRACKING_URI or experiments/mlflow.db)")
    p.set_defaults(func=run_judge)


def _problem(args) -> str | None:
    if args.train:
        if not args.runs:
            return "--train needs the runs of a sweep on a generated set (RUN_ID...: a parent id alone, or its configs)"
        if args.negatives < 1 or args.max_pairs < 2 or args.epochs < 1:
            return "--negatives and --epochs must be >= 1, --max-pairs >= 2"
        return None
    if not args.calibrate and not args.out:
        return "give --out QRELS (or --calibrate to measure the judge first, or --train NAME to train one)"
    if args.labels and not args.calibrate:
        return "--labels measures judges against a person's grades: give it with --calibrate"
    if not args.runs and not (args.calibrate and args.labels):
        return "give the runs to pool: RUN_ID... (or a sweep's parent id alone)"
    if not args.calibrate and args.judge_model and (args.model or args.base_url):
        return "--out writes one judge's grades: give --judge-model NAME or an LLM (--base-url, --model), not both"
    if not args.calibrate and (problem := output_problem(args.out, "--out")):  # before any pair is judged
        return problem
    if args.k < 1 or args.sample < 2:
        return "--k must be >= 1 and --sample >= 2"
    if (args.timeout_s is not None and args.timeout_s <= 0) or (args.concurrency is not None and args.concurrency < 1):
        return "--timeout-s must be > 0 and --concurrency >= 1"
    if args.max_queries is not None and args.max_queries < 1:
        return "--max-queries must be >= 1"
    if (args.min_usable is not None and not 0 <= args.min_usable <= 1) or (args.max_retries or 0) < 0:
        return "--min-usable is a share between 0 and 1; --max-retries >= 0"
    return None


def run_judge(args) -> int:
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # one bar per run read: noise
    if problem := _problem(args):
        print(f"kbench: error: {problem}", file=sys.stderr)
        return 2
    if args.train:
        report = judging.train_judge_on_runs(args.runs, args.train, k=args.k, negatives=args.negatives,
                                             max_pairs=args.max_pairs, epochs=args.epochs, seed=args.seed,
                                             tracking_uri=args.tracking_uri, force=args.force,
                                             workspace=args.workspace)
        counts, taken = report.card["counts"], report.card["pairs_from"]
        print(f"trained judge {args.train} on {counts['pairs']} pairs of {counts['questions']} questions "
              f"({counts['positives']} relevant: {taken['pooled_positives']} pooled, {taken['reference_positives']} "
              f"reference passages; {counts['negatives']} hard negatives from the top {args.k} of the runs) in "
              f"{report.card['train_seconds']} s, of which the training steps {report.card['fit_seconds']} s "
              f"(estimated {report.card['estimated_seconds']} s)")
        held = report.card["combination"]["held_out_auc"]
        print("held-out AUC (0.5: no better than chance): " + ", ".join(f"{k} {v:.3f}" for k, v in held.items()))
        print(f"saved {report.path}; measure it: kbench judge RUN... --calibrate --judge-model {args.train} "
              "[--labels LABELS]; use it: --judge-model on kbench judge and kbench label")
        return 0
    trained = judging.TrainedJudge.load(args.judge_model, args.workspace) if args.judge_model else None
    with contextlib.ExitStack() as stack:
        judges = [] if trained is None else [trained]
        if trained is None or args.model or args.base_url:
            judges.append(judging.LLMJudge(stack.enter_context(_llm_client(args))))
        if args.calibrate:
            return print_calibration(_calibrate(args, judges))
        report = judging.judge_runs(args.runs, judges[0], k=args.k, out=Path(args.out),
                                    tracking_uri=args.tracking_uri, max_queries=args.max_queries, seed=args.seed)
    sample = f" (a seeded sample of {report.questions} questions, --max-queries)" if report.sampled else ""
    print(f"pooled {report.pooled} (query, chunk) pairs from the top {args.k} of {len(report.runs)} runs{sample}; "
          f"judged every one with {judges[0].describe()} ({report.labeled} carry the dataset's label too): "
          f"{report.judged} grades ({report.cache_hits} from the cache), {report.unparsed} answers unparsed")
    if report.partial:
        print(f"WARNING: --allow-partial: only {report.judged} of {report.judged + report.unparsed} answers held a "
              "grade; the qrels rest on those (\"partial\": true in the provenance)")
    print("grades: " + ", ".join(f"{g}: {n}" for g, n in report.grades.items()))
    prompt = None if isinstance(judges[0], judging.TrainedJudge) else PROMPT  # a cross-encoder reads no prompt
    print(tracking.mlflow_feedback.log_judge_feedback(f"{args.out}.json", args.tracking_uri, meanings=GRADES,
                                                      prompt_template=prompt).summary())
    rows = [[name, f"{report.judged_at_k_before[name]:.4f}", f"{report.judged_at_k_after[name]:.4f}"]
            for name in report.judged_at_k_before]
    print(format_table(["run", f"judged_at_{args.k} before", "after"], rows))
    print(f"wrote {args.out} and {args.out}.json; use it with --set dataset.judged_qrels={args.out} "
          "(dataset.judged_qrels_use: beside | instead)")
    return 0


def _llm_client(args):
    policy = llm.LLMPolicy(**{k: v for k, v in (("timeout_s", args.timeout_s), ("concurrency", args.concurrency),
                                                ("min_usable", args.min_usable), ("max_retries", args.max_retries))
                              if v is not None}, allow_partial=args.allow_partial)
    endpoint = llm.Endpoint("judge", args.base_url, args.model, args.api_key_env, base_url_option="--base-url")
    client = llm.LLMClient(endpoint, stage="judge", policy=policy, cache_root=workspace_dir(args.workspace) / "cache",
                           cache_params={"prompt_sha256": PROMPT_SHA256})
    try:
        client.check_endpoint()  # before the runs are read and pooled: a dead port is one line in seconds
    except BaseException:
        client.close()
        raise
    return client


def _calibrate(args, judges) -> list:
    if not args.labels:
        return judging.calibrate(args.runs, judges, k=args.k, sample=args.sample, seed=args.seed,
                                 tracking_uri=args.tracking_uri)
    labels_path = Path(args.labels).expanduser()
    pool = labelling.LabelPool.read(labelling.pool_path(labels_path))
    labels = labelling.LabelsFile.open(labels_path, pool)
    relevant_from = 1 if pool.scale == "binary" else judging.judge.RELEVANT_FROM
    items = [judging.LabelledPair(judging.Pair(p.query_id, p.doc_id, p.start, p.end), pool.questions[p.query_id],
                                  p.text, int(grade >= relevant_from))
             for p, grade in zip(pool.pairs, labels.grades()) if grade == grade]  # NaN: not graded
    chosen = judging.balanced_sample(items, args.sample, args.seed)
    return judging.calibrate_items(chosen, judges, gold=f"a person's grades ({labels_path.name}, grade >= "
                                                      f"{relevant_from} relevant)")


def print_calibration(calibrations) -> int:
    for c in calibrations:
        print(f"{c.judge}: calibration on {c.n} labeled pairs ({c.unparsed} answers unparsed) against {c.gold}: "
              f"Cohen's kappa {c.kappa:.4f}, agreement {c.agreement:.1%} (judge grade >= 2 = relevant)")
        if c.assumed_negatives:
            print(f"  {c.assumed_negatives} of its not-relevant pairs are pooled documents the qrels do not grade, "
                  "counted as not relevant (the qrels hold only positives, as a real set's do): the kappa is a "
                  "lower bound")
        rows = [[f"label {gold}", *map(str, c.table[gold])] for gold in (0, 1)]
        print(format_table(["", "judge 0", "judge 1", "judge 2", "judge 3"], rows))
    if len(calibrations) > 1:
        best = max(calibrations, key=lambda c: c.kappa if c.kappa == c.kappa else -2)
        print(f"{best.judge} agrees best with {calibrations[0].gold} (kappa {best.kappa:.4f}); kbench label uses the "
              "judge that agrees best with the humans for PPI")
    return 0
