"""kbench datasets list | build code-qa PATH --out DIR"""
from __future__ import annotations

from kbench.cli.tables import format_table
from kbench.datasets.code_qa import build_code_qa
from kbench.datasets.registry import DATASETS


def add_parser(sub) -> None:
    p = sub.add_parser("datasets", help="datasets: list, build")
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


def list_datasets(args) -> int:

    rows = []
    for entry in DATASETS.values():
        path = entry.location()
        rows.append([entry.name, entry.layout, "yes" if path.is_dir() else "MISSING", str(path), entry.description])
    print(format_table(["name", "layout", "present", "path", "description"], rows))
    print("\nAny BEIR or span folder works too: dataset: {path: /path/to/folder}")
    return 0


def build_code_qa_cmd(args) -> int:

    report = build_code_qa(args.path, args.out, languages=args.languages, force=args.force)
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
