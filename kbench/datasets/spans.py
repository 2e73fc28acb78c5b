"""Span layout: documents plus questions whose references are character spans in a document.

Two on-disk forms are read:
- Chroma's chunking-evaluation form: ``corpora/<corpus_id>.md`` and ``questions_df.csv`` with columns
  ``question``, ``references`` (JSON list of ``{content, start_index, end_index}``) and ``corpus_id``.
- kbench's form (``datasets/demo``, the code-QA builder): ``docs/**`` (doc_id = path relative to docs/)
  and ``questions.jsonl`` with ``{query_id, question, references: [{doc_id, start_index, end_index, content}]}``.
Offsets are Python string indices into the file read as UTF-8; every reference is checked against its
``content`` at load time, so a dataset whose offsets drift is refused, not silently mis-scored.
"""
from __future__ import annotations

import csv
import json
from dataclasses import replace
from pathlib import Path

from kbench.datasets.beir import DatasetError
from kbench.records import Dataset, Document, Query, Span
from kbench.sources.folder import FolderSource

CODE_EXTENSIONS = {".py": "python", ".ts": "typescript", ".tsx": "typescript", ".js": "javascript",
                   ".go": "go", ".java": "java", ".rs": "rust"}


def is_chroma_folder(path: Path) -> bool:
    return (path / "questions_df.csv").is_file() and (path / "corpora").is_dir()


def is_kbench_span_folder(path: Path) -> bool:
    return (path / "questions.jsonl").is_file() and (path / "docs").is_dir()


def doc_type_for(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in CODE_EXTENSIONS:
        return "code"
    if suffix in {".md", ".markdown"}:
        return "markdown"
    if suffix in {".yaml", ".yml", ".json"}:
        return "openapi"
    return "text"


def _check(documents: dict[str, Document], doc_id: str, ref: dict, where: str) -> Span:
    doc = documents.get(doc_id)
    if doc is None:
        raise DatasetError(f"{where}: reference names document {doc_id!r}, which is not in the corpus "
                           "(a file left out by dataset.include/exclude, or skipped as empty/binary/oversized?)")
    start, end = int(ref["start_index"]), int(ref["end_index"])
    if "content" in ref and doc.text[start:end] != ref["content"]:
        raise DatasetError(f"{where}: reference [{start}:{end}] of {doc_id!r} does not match its content")
    return Span(doc_id, start, end)


def load_chroma(path: Path, name: str | None = None, corpora: list[str] | None = None) -> Dataset:
    documents = {}
    for file in sorted((path / "corpora").glob("*.md")):
        if corpora and file.stem not in corpora:
            continue
        documents[file.stem] = Document(file.stem, file.read_text(encoding="utf-8"), title=file.stem,
                                        url=str(file), source_id=file.stem, doc_type="markdown")
    queries, spans = [], {}
    with (path / "questions_df.csv").open(encoding="utf-8", newline="") as f:
        for n, row in enumerate(csv.DictReader(f)):
            if row["corpus_id"] not in documents:
                continue
            qid = f"{row['corpus_id']}-{n:04d}"
            refs = json.loads(row["references"])
            spans[qid] = [_check(documents, row["corpus_id"], r, f"questions_df.csv row {n + 2}") for r in refs]
            queries.append(Query(qid, row["question"], {"corpus_id": row["corpus_id"]}))
    return Dataset(name or path.name, list(documents.values()), queries, spans=spans)


def load_kbench_spans(path: Path, name: str | None = None, source: FolderSource | None = None) -> Dataset:
    """``source`` sets include/exclude globs and the size cap for ``docs/`` (its root is ignored)."""
    docs_dir = path / "docs"
    source = FolderSource(docs_dir) if source is None else replace(source, root=docs_dir)
    loaded, skipped = source.load()  # loaders by type; empty/binary/undecodable/oversized files skipped
    documents = {d.doc_id: d for d in loaded}
    queries, spans = [], {}
    with (path / "questions.jsonl").open(encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            row = json.loads(line)
            qid = str(row["query_id"])
            spans[qid] = [_check(documents, r["doc_id"], r, f"questions.jsonl:{n}") for r in row["references"]]
            queries.append(Query(qid, row["question"]))
    return Dataset(name or path.name, list(documents.values()), queries, spans=spans, skipped=skipped)


def doc_qrels_from_spans(spans: dict[str, list[Span]]) -> dict[str, dict[str, int]]:
    """A document is relevant to a question when it holds one of its reference spans."""
    return {qid: {s.doc_id: 1 for s in refs} for qid, refs in spans.items()}
