"""kbench datasets list | build code-qa PATH --out DIR | build synthetic SOURCE --method M --out DIR | inspect DATASET |
publish DATASET [--name NAME] | import-queries LOG --docs SOURCE --out DIR | match LOG SET [SET ...]"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from kbench import compare, datasets, evalsets, tracking
from kbench.cli import add_command
from kbench.cli.tables import format_table
from kbench.datasets.config import DatasetConfig
from kbench.datasets.registry import DATASETS, load_dataset
from kbench.language.census import census_lines, take_census
from kbench.packages import require
from kbench.paths import workspace_dir


def add_parser(sub) -> None:
    p = add_command(sub, "datasets")
    dsub = p.add_subparsers(dest="datasets_command", required=True, metavar="ACTION")
    ls = dsub.add_parser("list", help="registered datasets and where they are")
    ls.set_defaults(func=list_datasets)
    build = dsub.add_parser("build", help="build a span dataset from your own material")
    bsub = build.add_subparsers(dest="build_kind", required=True, metavar="KIND")
    cq = bsub.add_parser("code-qa", help="questions from docstrings, answers = the functions (docstrings removed)")
    cq.add_argument("path", help="a source tree, e.g. a package folder")
    cq.add_argument("--out", required=True, help="new folder for docs/ + questions.jsonl (use as dataset.path)")
    cq.add_argument("--languages", nargs="+", metavar="LANG",
                    help="python javascript typescript tsx go rust java (default: all)")
    cq.add_argument("--force", action="store_true", help="replace docs/ and questions.jsonl in a non-empty --out")
    cq.set_defaults(func=build_code_qa_cmd)
    add_synthetic_parser(bsub)
    ins = dsub.add_parser("inspect", help="questions, coverage, near-duplicates, leakage; with runs, saturation "
                                          "and the minimum detectable difference")
    ins.add_argument("dataset", help="a registered dataset name or a dataset folder (BEIR or span layout)")
    ins.add_argument("--runs", nargs="+", metavar="RUN_ID", help="runs of several configs on this dataset, or one "
                     "sweep's parent run id")
    ins.add_argument("--metric", help="per-query metric for saturation and MDE (default: nDCG@10, finest level)")
    ins.add_argument("--split", default="test", help="BEIR qrels split (default test)")
    ins.add_argument("--tracking-uri", help="MLflow store (default: MLFLOW_TRACKING_URI or experiments/mlflow.db)")
    ins.add_argument("--workspace", default="experiments", help="workspace for the MLflow store (default experiments)")
    ins.add_argument("--no-log", action="store_true", help="print only; do not log to MLflow")
    ins.set_defaults(func=inspect_cmd)
    pub = dsub.add_parser("publish", help="a dataset's questions and labels as an MLflow evaluation dataset (MLflow's "
                                          "Datasets page); a run reads them back with dataset.questions_from")
    pub.add_argument("dataset", help="a registered dataset name or a dataset folder (BEIR or span layout)")
    pub.add_argument("--name", help="the evaluation dataset's name (default: the dataset's name); publishing again "
                     "updates its records")
    pub.add_argument("--experiment", default="kbench", help="the MLflow experiment it belongs to (default kbench)")
    pub.add_argument("--split", default="test", help="BEIR qrels split (default test)")
    pub.add_argument("--tracking-uri", help="MLflow store (default: MLFLOW_TRACKING_URI or experiments/mlflow.db)")
    pub.add_argument("--workspace", default="experiments", help="workspace for the MLflow store (default experiments)")
    pub.set_defaults(func=publish_cmd)
    add_import_queries_parser(dsub)


def add_import_queries_parser(dsub) -> None:
    iq = dsub.add_parser("import-queries", help="a query log (CSV, TSV, JSONL, text, or an MLflow experiment's "
                         "traces) as an evaluation set: questions without labels, duplicates and near-duplicates "
                         "removed, a seeded sample")
    iq.add_argument("log", nargs="?", help="the log: .csv/.tsv (a header), .jsonl (one object a line), .txt (one "
                    "question a line); or give --mlflow-experiment")
    iq.add_argument("--docs", required=True, metavar="SOURCE", help="the documents the questions ask about: a folder, "
                    "or a registered dataset's name (its documents); copied into the set's docs/")
    iq.add_argument("--out", required=True, help="new folder for docs/, questions.jsonl, manifest.json")
    iq.add_argument("--column", help="the column (CSV) or key (JSONL; a dotted path like request.query; MLflow: a key "
                    "of the trace's request) holding the question (default: query, question, text, ...; a chat "
                    "request's last user message)")
    iq.add_argument("--max", type=_positive, default=None, metavar="N", dest="max_questions",
                    help="keep a seeded sample of N distinct questions (default: all)")
    iq.add_argument("--seed", type=int, default=0, help="seed of the sample and of which near-duplicate stays (default 0)")
    iq.add_argument("--mlflow-experiment", metavar="NAME", help="read the requests of this MLflow experiment's traces "
                    "instead of a file")
    iq.add_argument("--tracking-uri", help="--mlflow-experiment: its store (default: MLFLOW_TRACKING_URI or "
                    "experiments/mlflow.db)")
    iq.add_argument("--include", nargs="+", metavar="GLOB", help="--docs folder: files to take, e.g. '**/*.md'")
    iq.add_argument("--exclude", nargs="+", metavar="GLOB", help="--docs folder: paths to leave out")
    iq.add_argument("--force", action="store_true", help="replace a set kbench wrote at --out (never other files)")
    iq.set_defaults(func=import_queries_cmd)
    ma = dsub.add_parser("match", help="how far generated sets are from a query log: a two-sample classifier's AUC "
                         "(0.5: indistinguishable), question lengths and forms side by side, the closest generator")
    ma.add_argument("log", help="the query log (CSV, TSV, JSONL, text), or a set of real questions (a dataset name or "
                    "folder)")
    ma.add_argument("sets", nargs="+", metavar="SET", help="the sets to measure (dataset names or folders)")
    ma.add_argument("--max", type=_positive, default=1000, metavar="N", dest="max_questions",
                    help="a seeded sample of at most N questions a side (default 1000)")
    ma.add_argument("--seed", type=int, default=0, help="seed of the samples and the folds (default 0)")
    ma.add_argument("--split", default="test", help="BEIR qrels split (default test)")
    ma.add_argument("--workspace", default="experiments", help="embeddings cached under WORKSPACE/cache; each set's "
                    "result written to WORKSPACE/matches/ (a sweep on the set names it)")
    ma.add_argument("--json", metavar="FILE", help="also write the whole report as JSON")
    ma.set_defaults(func=match_cmd)


def add_synthetic_parser(bsub) -> None:
    sy = bsub.add_parser("synthetic", help="questions generated from unlabeled documents (ict, heading, commits, llm)")
    sy.add_argument("source", help="a folder of documents, a registered dataset's name (its documents), or for "
                    "--method commits a local git repository")
    sy.add_argument("--method", required=True, choices=datasets.synthetic.ALL_METHODS, help="ict: a sentence is the question; "
                    "heading: a section's heading path; commits: a commit's subject; llm: a model writes the "
                    "question and quotes its answer")
    sy.add_argument("--out", required=True, help="new folder for docs/, questions.jsonl, manifest.json")
    sy.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    sy.add_argument("--per-doc", type=_positive, default=None, metavar="N", help="at most N questions a document")
    sy.add_argument("--max", type=_positive, default=None, metavar="N", dest="max_questions",
                    help="at most N questions, spread across documents")
    sy.add_argument("--max-word-overlap", type=float, default=None, metavar="F",
                    help="drop questions sharing more than this share of their words with the reference (0-1)")
    sy.add_argument("--min-bm25-rank", type=_positive, default=None, metavar="R",
                    help="drop questions whose gold passage BM25 ranks better than R for the question alone")
    sy.add_argument("--keep-documents", action="store_true",
                    help="index the documents whole: remove no heading or sentence a question came from (the "
                         "leak is measured, not prevented); by default every candidate's is removed, whatever --max")
    sy.add_argument("--heading-removal", choices=["marker", "line"], default=None,
                    help="heading: what leaves the indexed copy; marker (default): a heading's words, its line kept as "
                         "a bare '##' so sections keep their place; line: the whole heading line")
    sy.add_argument("--include", nargs="+", metavar="GLOB", help="folder or git paths to take, e.g. '**/*.md'")
    sy.add_argument("--exclude", nargs="+", metavar="GLOB", help="paths to leave out")
    sy.add_argument("--since", help="commits: only commits after this date (anything git log --since takes)")
    sy.add_argument("--max-commits", type=_positive, default=None, metavar="N", help="commits: the newest N")
    sy.add_argument("--base-url", help="llm: an OpenAI-compatible endpoint (default OPENAI_BASE_URL; `kbench serve` "
                    "prints one)")
    sy.add_argument("--model", help="llm: the chat model")
    sy.add_argument("--api-key-env", default="OPENAI_API_KEY", help="llm: the variable holding the key")
    sy.add_argument("--workspace", default="experiments", help="llm: answers are cached under WORKSPACE/cache/llm")
    sy.add_argument("--timeout-s", type=float, default=None, metavar="S",
                    help="llm: seconds to wait for one answer (default 60; a small model on a busy CPU needs more)")
    sy.add_argument("--concurrency", type=_positive, default=None, metavar="N",
                    help="llm: requests in flight (default 4; `kbench serve` answers one at a time, so 1 there)")
    sy.add_argument("--min-usable", type=float, default=None, metavar="F",
                    help="llm: share of answers that must give a located question (default 0.8); below it the "
                         "build stops early with exit 2")
    sy.add_argument("--allow-partial", action="store_true",
                    help="llm: go on below --min-usable (said loudly; \"partial\": true in manifest.json)")
    sy.add_argument("--force", action="store_true", help="replace a set built before at --out (never the source "
                    "or other files)")
    sy.set_defaults(func=build_synthetic_cmd)


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {value!r}")
    return number


def list_datasets(args) -> int:

    rows = []
    for entry in DATASETS.values():
        path = entry.location()
        rows.append([entry.name, entry.layout, "yes" if path.is_dir() else "MISSING", str(path), entry.description])
    print(format_table(["name", "layout", "present", "path", "description"], rows))
    print("\nAny BEIR or span folder works too: dataset: {path: /path/to/folder}")
    return 0


def build_code_qa_cmd(args) -> int:

    report = datasets.code_qa.build_code_qa(args.path, args.out, languages=args.languages, force=args.force)
    rows = [[lang, report.files_by_language[lang], report.questions_by_language.get(lang, 0)]
            for lang in sorted(report.files_by_language)]
    print(format_table(["language", "files", "questions"], rows))
    print(f"\n{report.questions} questions from {report.documented_functions} documented functions "
          f"in {report.files} files")
    if report.dropped_questions:
        print("dropped: " + ", ".join(f"{k} {v}" for k, v in sorted(report.dropped_questions.items())))
    if report.skipped_files:
        print("skipped files: " + ", ".join(f"{k} {len(v)}" for k, v in sorted(report.skipped_files.items())))
    print(f"wrote {report.out} (docs/, questions.jsonl, manifest.json); use it as dataset: {{path: {report.out}}}")
    return 0


def build_synthetic_cmd(args) -> int:
    if args.max_word_overlap is not None and not 0 <= args.max_word_overlap <= 1:
        print("kbench: error: --max-word-overlap is a share between 0 and 1", file=sys.stderr)
        return 2
    if args.min_usable is not None and not 0 <= args.min_usable <= 1:
        print("kbench: error: --min-usable is a share between 0 and 1", file=sys.stderr)
        return 2
    synthetic = datasets.synthetic
    if args.heading_removal and args.method != "heading":
        print("kbench: error: --heading-removal applies to --method heading only", file=sys.stderr)
        return 2
    report = synthetic.build_from_source(args.source, args.out, method=args.method, seed=args.seed,
                                         per_doc=args.per_doc, max_questions=args.max_questions, force=args.force,
                                         include=args.include, exclude=args.exclude, since=args.since,
                                         max_commits=args.max_commits,
                                         filters=synthetic.Filters(args.max_word_overlap, args.min_bm25_rank),
                                         keep_documents=args.keep_documents,
                                         params={"removal": args.heading_removal} if args.heading_removal else None,
                                         llm_options=synthetic.LLMOptions(
                                             args.base_url, args.model, args.api_key_env, args.workspace,
                                             args.timeout_s, args.concurrency, args.min_usable, args.allow_partial))
    print(f"{report.kept} questions ({args.method}) from {report.documents_with_questions} of {report.documents} "
          f"documents; {report.proposals} candidates, of which {report.available} pass the checks (what these documents "
          "can give)")
    altered = synthetic.build.corpus_words(report.corpus)
    print(f"documents: {altered}" if altered else "documents: whole (nothing removed from the indexed copy; the "
          "leakage below is what the questions' words give away)")
    rows = [[reason, count] for reason, count in sorted(report.rejected.items(), key=lambda x: -x[1])]
    if rows:
        print(format_table(["rejected: reason", "count"], rows))
    if report.skipped_files:
        print("skipped files: " + "; ".join(
            f"{k} {v}" + (f" ({', '.join(report.skipped_examples[k])}{', ...' if v > len(report.skipped_examples[k]) else ''})"
                          if report.skipped_examples.get(k) else "")
            for k, v in sorted(report.skipped_files.items())))
        if "not_documentation" in report.skipped_files:
            print("  (documentation files are read by default: .md, .mdx, .rst, .txt, .html, .pdf, .docx ...; take "
                  "others with --include GLOB ..., e.g. --include '**/*.md' 'LICENSE')")
    if report.cache:
        print("llm: " + ", ".join(f"{k} {v}" for k, v in report.cache.items()))
    for name, strata in report.leakage.items():
        print(f"leakage {name}: " + ", ".join(f"{k} {v}" for k, v in sorted(strata.items())))
    print(f"wrote {report.out} (docs/, questions.jsonl, manifest.json); use it as dataset: {{path: {report.out}}}")
    return 0


def inspect_cmd(args) -> int:
    if not args.no_log:  # it logs at the end: a broken MLflow is said before the inspection, not after
        require(("mlflow",), "kbench datasets inspect (it logs to MLflow; --no-log prints only)")
    config = (DatasetConfig(path=args.dataset, split=args.split) if Path(args.dataset).expanduser().is_dir()
              else DatasetConfig(name=args.dataset, split=args.split))
    dataset = load_dataset(config)
    runs = compare.load_runs(args.runs, args.tracking_uri)[0] if args.runs else None
    result = evalsets.inspect_dataset(dataset, runs, args.metric)
    print(f"{dataset.name}: {len(dataset.documents)} documents, {len(dataset.queries)} questions")
    for line in census_lines(take_census(dataset.documents, dataset.queries)):
        print(line)
    print()
    print(format_table(["measure", "value"], result.rows()))
    for first, second in result.near_duplicate_examples[:3]:
        print(f"near-duplicate: {first!r} ~ {second!r}")
    print("\nwhat it means for comparing configs:")
    for line in result.reading():
        print(f"  - {line}")
    print(f"\n{len(result.samples)} sample questions (spread over the set) and their references:")
    for sample in result.samples:
        print(f"  {sample['question_id']}: {sample['question']}\n      -> {sample['reference']}")
    if not args.no_log:
        run_id = evalsets.log_inspection(result, workspace_dir(args.workspace), args.tracking_uri,
                                         config.model_dump(exclude_defaults=True))
        print(f"\nlogged to MLflow: experiment datasets-inspect, run {run_id}")
    return 0


def publish_cmd(args) -> int:
    config = (DatasetConfig(path=args.dataset, split=args.split) if Path(args.dataset).expanduser().is_dir()
              else DatasetConfig(name=args.dataset, split=args.split))
    dataset = load_dataset(config)
    workspace = workspace_dir(args.workspace)
    client = tracking.mlflow_run.mlflow_client(args.tracking_uri, workspace)
    experiment_id = tracking.mlflow_run.ensure_experiment(client, args.experiment, workspace)
    name = args.name or dataset.name
    published = tracking.mlflow_dataset.publish_questions(dataset, name, str(client.tracking_uri), experiment_id)
    labels = "reference spans" if dataset.has_spans else "document qrels"
    print(f"published {len(dataset.queries)} questions of {dataset.name} ({labels}) as MLflow evaluation dataset "
          f"{name!r} ({published.dataset_id}, {published.records} records) in experiment {args.experiment!r} of "
          f"{client.tracking_uri}")
    if published.merged:
        print(f"note: {published.merged} questions repeat another's text; MLflow keys records by their inputs and "
              "keeps one of each")
    read_back = ["--set", f"dataset.questions_from={name}"]  # quoted for a shell: a name may hold quotes or spaces
    if args.tracking_uri is not None:
        read_back += ["--set", f"dataset.questions_tracking_uri={client.tracking_uri}"]
    print(f"a run reads them back with: {shlex.join(read_back)}")
    return 0


def import_queries_cmd(args) -> int:
    report = datasets.query_log.import_queries(
        args.log, args.out, docs=args.docs, column=args.column, max_questions=args.max_questions, seed=args.seed,
        mlflow_experiment=args.mlflow_experiment, tracking_uri=args.tracking_uri, force=args.force,
        include=args.include, exclude=args.exclude)
    for line in report.lines():
        print(line)
    print(f"wrote {report.out} (docs/, questions.jsonl, manifest.json); its questions carry no label yet: runs rank "
          "them and score none until kbench judge or kbench label labels them (docs/how-to/query-logs.md)")
    return 0


def match_cmd(args) -> int:
    report = evalsets.match_sets(args.log, args.sets, workspace_dir(args.workspace), seed=args.seed,
                                 max_questions=args.max_questions, split=args.split)
    print("\n".join(report.lines()))
    if args.json:
        Path(args.json).expanduser().write_text(json.dumps(report.as_dict(), indent=2), encoding="utf-8")
        print(f"written: {args.json}")
    return 0
