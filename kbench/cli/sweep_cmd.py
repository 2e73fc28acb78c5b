"""kbench sweep CONFIG [--executor local|dask] [--scheduler tcp://HOST:PORT] [--workers N]"""
from __future__ import annotations

import sys

from kbench import compare, sweep
from kbench.cli import add_command, seed_number
from kbench.cli.console import quiet_libraries
from kbench.cli.ui_cmd import browse_hint


def add_parser(sub) -> None:
    p = add_command(sub, "sweep")
    p.add_argument("config", help="a YAML config with a 'sweep:' grid and/or 'variants:', e.g. configs/sweeps/demo.yaml")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a baseline value by dotted path, e.g. --set dataset.max_queries=30")
    p.add_argument("--allow-partial", action="store_true",
                   help="let LLM stages go on below llm.policy.min_usable (said loudly, tagged kbench.llm.partial)")
    p.add_argument("--executor", choices=["local", "dask"], default="local",
                   help="local: one config after another in this process; dask: on a Dask cluster")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help="a running Dask scheduler; without it --executor dask starts a LocalCluster on 127.0.0.1")
    p.add_argument("--workers", type=int, default=2, help="LocalCluster workers (one thread each); default 2")
    p.add_argument("--no-reuse", action="store_true",
                   help="run configs again even when an equal config (same run key) finished outside this sweep")
    p.add_argument("--no-report", action="store_true", help="skip the comparison report at the end")
    p.add_argument("--quiet", action="store_true", help="no progress bars inside a config (one line per config)")
    p.add_argument("--dry-run", action="store_true",
                   help="list the configs, their run keys and resolved knobs that differ; run nothing")
    p.add_argument("--confirm-half", action="store_true",
                   help="choose the winner on a seeded half of the queries and report its gain on the other half")
    p.add_argument("--confirm-seed", type=seed_number, default=0, metavar="N", help="the seed of --confirm-half (default 0)")
    p.add_argument("--select-on", metavar="SPLIT", help="run the sweep on this qrels split (sets dataset.split)")
    p.add_argument("--confirm-on", metavar="SPLIT",
                   help="after the sweep, run the winner and the baseline on this split and report both gains")
    p.add_argument("--sets", nargs="+", metavar="DATASET_DIR",
                   help="run the sweep once on each of these evaluation sets (dataset.path), then recommend one "
                        "config across them: each config's bound per set, the smallest worst bound (kbench compare "
                        "--sweep A --sweep B does the same from logged sweeps)")
    p.add_argument("--until-decided", action="store_true",
                   help="score the grid on growing batches of questions (a generated set: more of its documents' "
                        "questions, same corpus) until the recommendation is decided at the margin or a budget is "
                        "spent; configs ruled out are scored no more; the bound holds over every look")
    p.add_argument("--max-questions", type=int, metavar="N", help="with --until-decided: ask at most N questions")
    p.add_argument("--max-minutes", type=float, metavar="M",
                   help="with --until-decided: start no new look after M minutes")
    p.set_defaults(func=run)


def run(args) -> int:
    # keep the sweep log readable: a line per config and its stages' bars, no model-loading bars, no MLflow INFO
    quiet_libraries(progress_bars=not args.quiet)

    if bool(args.select_on) != bool(args.confirm_on) or (args.confirm_on and args.confirm_half):
        print("kbench: error: give --select-on SPLIT and --confirm-on SPLIT together, or --confirm-half, not both",
              file=sys.stderr)
        return 2
    if args.select_on == args.confirm_on and args.confirm_on:
        print(f"kbench: error: --select-on and --confirm-on name the same split {args.confirm_on!r}; a confirmation "
              "needs queries the selection did not see", file=sys.stderr)
        return 2
    overrides = args.overrides + ([f"dataset.split={args.select_on}"] if args.select_on else []) + (
        ["llm.policy.allow_partial=true"] if args.allow_partial else [])
    if (args.max_questions is not None or args.max_minutes is not None) and not args.until_decided:
        print("kbench: error: --max-questions and --max-minutes are the budgets of --until-decided; add it",
              file=sys.stderr)
        return 2
    if args.until_decided:
        return run_until_decided(args, overrides)
    if args.sets:
        return run_sets(args, overrides)
    plan = sweep.load_sweep(args.config, overrides)
    if args.dry_run:
        try:  # every config's start-time checks, as the sweep makes them before its first config
            sweep.run.check_configs(plan)
        except sweep.SweepError as e:
            print(f"kbench: error: {e}", file=sys.stderr)
            return 2
        print(f"{len(plan.configs)} configs, sweep key {plan.sweep_key}; each config's resolved knobs that differ "
              "between configs:\n")
        for line in sweep.summary.plan_lines(plan):
            print(line)
        if plan.search.strategy != "grid":
            print(f"search: {plan.search.strategy} ({', '.join(f'{k}={v}' for k, v in plan.search.model_dump().items())})")
        budgeted = {(tuple(c.experiment.evaluation.budgets), c.experiment.evaluation.budget_tokenizer)
                    for c in plan.configs if c.experiment.evaluation.budgets}
        for budgets, tokenizer in sorted(budgeted, key=str):  # which tokenizer spends them (issue 53 item 4)
            from kbench.evaluation.budgets import budget_words

            print(f"evaluation.budgets {list(budgets)}: tokens {budget_words(tokenizer)}")
        return 0
    if plan.search.strategy == "tune":  # fusion knobs tuned on half the questions (docs/how-to/search.md)
        try:
            tuned = sweep.tuning.tune_fusion(plan.baseline, plan.search.tune_values(), seed=plan.search.seed,
                                             progress=not args.quiet)
        except ValueError as e:
            print(f"kbench: error: {e}", file=sys.stderr)
            return 2
        for line in tuned.lines():
            print(line)
        return 0
    if plan.search.strategy != "grid":  # race or stage-wise, in this process (docs/how-to/search.md)
        if args.executor != "local" or args.confirm_half or args.confirm_on:
            print(f"kbench: error: search: {plan.search.strategy} runs in this process without a confirmation split; "
                  "drop --executor dask / --confirm-*, or use search: {strategy: grid}", file=sys.stderr)
            return 2
        return run_in_process(lambda: sweep.search_run.run_search(plan, say=lambda line: print(line, flush=True),
                                                                  progress=not args.quiet))
    if args.workers < 1:
        print("kbench: error: --workers must be at least 1", file=sys.stderr)
        return 2

    outcome = run_grid(args, plan)
    if outcome is None:
        return 2
    if args.confirm_half or args.confirm_on:
        try:
            confirmation = sweep.confirm.confirm_sweep(outcome, plan, half_seed=args.confirm_seed,
                                                       select_on=args.select_on, confirm_on=args.confirm_on,
                                                       say=lambda line: print(line, flush=True))
        except (ValueError, KeyError) as e:
            print(f"kbench: error: confirmation: {e}", file=sys.stderr)
            return 2
        print()
        for line in (confirmation.lines() if confirmation else ["confirmation: fewer than two configs finished"]):
            print(line)
        if confirmation:
            sweep.confirm.record_confirmation(outcome, confirmation)
            print("  (also on the parent run: metrics confirm_*, and in its report)")
    if outcome.report_dir:
        print(f"report: {outcome.report_dir / 'report.html'} (also artifact report/ of the parent run)")
    print(f"MLflow parent run {outcome.parent_run_id} in {outcome.tracking_uri}")
    print(f"  compare: kbench compare --sweep {outcome.parent_run_id} --tracking-uri {outcome.tracking_uri}")
    print(f"  browse: {browse_hint(outcome.tracking_uri)}   (MLflow's UI on http://127.0.0.1:5000)")
    return 1 if outcome.errors else 0


def run_grid(args, plan):
    """Run the grid sweep of ``plan`` as the flags say and print its summary; None (the error said) on bad input."""
    try:
        executor = sweep.make_executor(args.executor, args.scheduler, args.workers, progress=not args.quiet)
        outcome = sweep.run_sweep(plan, executor, reuse=not args.no_reuse, report=not args.no_report,
                                  say=lambda line: print(line, flush=True))
    except (ValueError, sweep.SweepError) as e:
        print(f"kbench: error: {e}", file=sys.stderr)
        return None
    print()
    for line in sweep.summary.summary_lines(plan, outcome):
        print(line)
    return outcome


def run_sets(args, overrides: list[str]) -> int:
    """``--sets DIR DIR ...``: the sweep once per set (its own parent run, summary and winner.yaml), then one pick
    across the sets (``compare.across``), logged as one MLflow run beside the sweeps."""
    if len(args.sets) < 2 or len(set(args.sets)) < len(args.sets):
        print("kbench: error: --sets takes two or more different dataset folders (one pick across them); for one set "
              "use --set dataset.path=DIR", file=sys.stderr)
        return 2
    if args.confirm_half or args.confirm_on or args.dry_run:
        print("kbench: error: --sets runs grid sweeps to recommend across them; drop --confirm-* and --dry-run",
              file=sys.stderr)
        return 2
    plans = [sweep.load_sweep(args.config, overrides + [f"dataset.path={folder}"]) for folder in args.sets]
    if plans[0].search.strategy != "grid":
        print(f"kbench: error: --sets runs grid sweeps; this config searches by {plans[0].search.strategy} "
              "(use search: {strategy: grid})", file=sys.stderr)
        return 2
    outcomes = []
    for n, (folder, plan) in enumerate(zip(args.sets, plans), start=1):
        print(f"set {n}/{len(plans)}: {folder}", flush=True)
        outcome = run_grid(args, plan)
        if outcome is None:
            return 2
        print(f"MLflow parent run {outcome.parent_run_id} in {outcome.tracking_uri}\n")
        outcomes.append(outcome)
    failed = [folder for folder, o in zip(args.sets, outcomes) if o.errors or o.comparison is None]
    if failed:
        print(f"no recommendation across the sets: the sweep on {', '.join(failed)} has failed configs or fewer than "
              "two finished; fix them and run again (finished configs are kept)")
        return 1
    try:
        across = sweep.sets.recommend_sets(plans, outcomes, args.sets)
    except compare.CompareError as e:
        print(f"kbench: error: {e}", file=sys.stderr)
        return 2
    for line in across.lines():
        print(line)
    print(f"  resolved config of the pick: {across.winner_config} (run it: kbench run {across.winner_config})")
    print(f"  written: {across.folder / 'across.txt'}; MLflow run {across.run_id} (the pick, each set's lines)")
    print(f"  compare: kbench compare " + " ".join(f"--sweep {o.parent_run_id}" for o in outcomes)
          + f" --tracking-uri {outcomes[0].tracking_uri}")
    return 0


def run_until_decided(args, overrides: list[str]) -> int:
    """``--until-decided``: look after each batch of questions until the pick is decided or a budget is spent."""
    if args.sets or args.executor != "local" or args.confirm_half or args.confirm_on or args.dry_run:
        print("kbench: error: --until-decided scores one set in this process; drop --sets, --executor dask, "
              "--confirm-* and --dry-run", file=sys.stderr)
        return 2
    return run_in_process(lambda: sweep.until_decided.run_until_decided(
        args.config, overrides, max_questions=args.max_questions, max_minutes=args.max_minutes,
        say=lambda line: print(line, flush=True), progress=not args.quiet))


def run_in_process(search) -> int:
    """A search that runs in this process (race, stage-wise, --until-decided): ``search()`` gives its outcome; print
    its lines and its MLflow run."""
    try:
        outcome = search()
    except (sweep.SweepError, ValueError) as e:
        print(f"kbench: error: {e}", file=sys.stderr)
        return 2
    print()
    for line in outcome.lines():
        print(line)
    if outcome.run_id:
        print(f"MLflow run {outcome.run_id} in {outcome.tracking_uri}")
    return 0
