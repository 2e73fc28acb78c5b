"""Span layout: documents plus questions whose references are character spans in a document.

Two on-disk forms are read:
- Chroma's chunking-evaluation form: ``corpora/<corpus_id>.md`` and ``questions_df.csv`` with columns
  ``question``, ``references`` (JSON list of ``{content, start_index, end_index}``) and ``corpus_id``.
- kbench's form (``datasets/demo``, the code-QA builder): ``docs/**`` (doc_id = path relative to docs/)
  and ``questions.jsonl`` with ``{query_id, question, references: [{doc_id, start_index, end_index, content}]}``.
A reference with a ``doc_id`` and no offsets (``{"doc_id": "guide.md"}``) is a document label: the document is
relevant to the question (document-level metrics), with no span to score chunks against; a question whose
references are all of that kind is scored at document level only.
Offsets are Python string indices into the file read as UTF-8; every reference is checked at load time: whole
numbers, ``0 <= start_index < end_index <= len(document)``, and the text there equal to its ``content``, so a
dataset whose offsets drift is refused, not silently mis-scored. A question id used twice, a malformed line
and a reference to a document that is not in the corpus are refused too, with the file and line. A question
with empty text or ``references: []`` is dropped and counted (``empty_query``, ``no_references``), and
refused under ``dataset.strict``. ``"references": null`` marks a question not labelled yet (a query log's,
``kbench datasets import-queries``): it is kept, every run ranks it, and it is scored once a label reaches it
(``dataset.judged_qrels``); until then a run leaves it out of its metrics and counts it (``unlabelled``), never
scoring it 0. Files that link outside the dataset folder are never read.
"""
from __future__ import annotations

import csv
import io
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from kbench.datasets.reading import (EMPTY_QUERY, NO_REFERENCES, DatasetError, Problems, dataset_file, get_id,
                                     get_offset, get_text, iter_jsonl, json_type, note, read_text)
from kbench.errors import shorten
from kbench.records import Dataset, Document, Query, Span
from kbench.sources.folder import BROKEN_LINK, OUTSIDE_ROOT, FolderSource, is_inside
from kbench.sources.loaders import normalise_newlines

CODE_EXTENSIONS = {".py": "python", ".ts": "typescript", ".tsx": "typescript", ".js": "javascript",
                   ".go": "go", ".java": "java", ".rs": "rust"}
QUESTION_EXAMPLE = ('{"query_id": "q1", "question": "...", "references": [{"doc_id": "guide.md", "start_index": 0, '
                    '"end_index": 120, "content": "..."}]}')
SKIP_HINT = {OUTSIDE_ROOT: "it links outside the dataset folder and was not read",
             BROKEN_LINK: "it is a broken link"}


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


def check_reference(documents: dict[str, Document], doc_id: str, ref: Any, where: str,
                    skipped: dict[str, str] | None = None) -> Span:
    """The reference as a Span, or a DatasetError naming ``where`` and what is wrong with it."""
    if not isinstance(ref, dict):
        raise DatasetError(f"{where}: a reference must be an object with start_index, end_index and content "
                           f"(got {json_type(ref)} {shorten(ref)})")
    doc = documents.get(doc_id)
    if doc is None:
        reason = (skipped or {}).get(doc_id)
        why = (f"{SKIP_HINT.get(reason, f'it was skipped as {reason}')}" if reason else
               "a file left out by dataset.include/exclude, or skipped as empty/binary/oversized?")
        raise DatasetError(f"{where}: reference names document {doc_id!r}, which is not in the corpus ({why})")
    start, end = get_offset(ref, "start_index", where), get_offset(ref, "end_index", where)
    if start < 0 or end < 0:
        raise DatasetError(f"{where}: reference [{start}:{end}] of {doc_id!r} has a negative offset; offsets count "
                           "characters from 0")
    if start >= end:
        raise DatasetError(f"{where}: reference [{start}:{end}] of {doc_id!r} is empty or reversed; start_index "
                           "must be smaller than end_index (a reference covers at least one character)")
    if end > len(doc.text):
        raise DatasetError(f"{where}: reference [{start}:{end}] of {doc_id!r} ends past the document "
                           f"({len(doc.text)} characters); check the offsets (characters of the UTF-8 text)")
    if "content" in ref:
        content = ref["content"]
        if not isinstance(content, str):
            raise DatasetError(f"{where}: content must be a string (got {json_type(content)} {shorten(content)})")
        if doc.text[start:end] != content:
            raise DatasetError(f"{where}: reference [{start}:{end}] of {doc_id!r} does not match its content "
                               f"(the text there is {shorten(doc.text[start:end], 60)}, content is "
                               f"{shorten(content, 60)})")
    return Span(doc_id, start, end)


def _references(row: dict[str, Any], where: str) -> list[Any] | None:
    """The row's references; None for ``"references": null``, a question not labelled yet (a query log's)."""
    if "references" not in row:
        raise DatasetError(f"{where}: no 'references' field; give a list of {{doc_id, start_index, end_index, "
                           "content}} (or [] for a question without an answer, which is counted and left out; null "
                           "for a question not labelled yet)")
    refs = row["references"]
    if refs is None:
        return None
    if not isinstance(refs, list):
        raise DatasetError(f"{where}: references must be a list (got {json_type(refs)} {shorten(refs)})")
    return refs


def load_chroma(path: Path, name: str | None = None, corpora: list[str] | None = None) -> Dataset:
    available = sorted(p.stem for p in (path / "corpora").glob("*.md"))
    unknown = sorted(set(corpora or []) - set(available))
    if unknown:
        raise DatasetError(f"dataset.subset: no corpus {', '.join(map(repr, unknown))} in {path / 'corpora'}; "
                           f"available: {', '.join(available)}")
    documents, problems, skipped_docs = {}, {}, {}
    for file in sorted((path / "corpora").glob("*.md")):
        if corpora and file.stem not in corpora:
            continue
        relative = file.relative_to(path).as_posix()
        if file.is_symlink() and not file.exists():
            note(problems, BROKEN_LINK, relative)
            skipped_docs[file.stem] = BROKEN_LINK
            continue
        if not is_inside(file, path):
            note(problems, OUTSIDE_ROOT, relative)
            skipped_docs[file.stem] = OUTSIDE_ROOT
            continue
        documents[file.stem] = Document(file.stem, normalise_newlines(read_text(file)), title=file.stem,
                                        url=str(file), source_id=file.stem, doc_type="markdown")
    questions_file = dataset_file(path, "questions_df.csv")
    reader = csv.DictReader(io.StringIO(read_text(questions_file), newline=""))
    missing = [c for c in ("question", "references", "corpus_id") if c not in (reader.fieldnames or [])]
    if missing:
        raise DatasetError(f"{questions_file}:1: no column {', '.join(missing)} (columns: "
                           f"{shorten(reader.fieldnames or [])}); the header is question,references,corpus_id")
    queries, spans = [], {}
    try:
        rows = list(reader)
    except csv.Error as e:
        raise DatasetError(f"{questions_file}:{reader.line_num}: not valid CSV ({e}); quote fields that hold commas "
                           "or newlines") from None
    for n, row in enumerate(rows):
        where = f"questions_df.csv row {n + 2}"
        if None in row or any(value is None for value in row.values()):
            given = sum(value is not None for key, value in row.items() if key is not None) + len(row.get(None, []))
            raise DatasetError(f"{where}: {given} columns where the header has {len(reader.fieldnames or [])}; "
                               "every row is question,references,corpus_id (quote fields holding commas)")
        corpus_id = row["corpus_id"]
        if corpora and corpus_id not in corpora:
            continue  # another corpus than the chosen subset
        try:
            refs = json.loads(row["references"])
        except (json.JSONDecodeError, RecursionError) as e:
            raise DatasetError(f"{where}: references is not valid JSON ({getattr(e, 'msg', 'nested too deeply')}); "
                               'write a JSON list like [{"content": "...", "start_index": 0, "end_index": 10}]'
                               ) from None
        if refs is None:
            raise DatasetError(f"{where}: references must be a list (got null); questions not labelled yet go in "
                               "kbench's span layout (questions.jsonl with \"references\": null)")
        refs = _references({"references": refs}, where)
        qid = f"{corpus_id}-{n:04d}"
        checked = [check_reference(documents, corpus_id, r, f"{where} references[{i}]", skipped_docs)
                   for i, r in enumerate(refs)]
        if not row["question"].strip():
            note(problems, EMPTY_QUERY, where)
        elif not checked:
            note(problems, NO_REFERENCES, where)
        else:
            spans[qid] = checked
            queries.append(Query(qid, row["question"], {"corpus_id": corpus_id}))
    return Dataset(name or path.name, list(documents.values()), queries, spans=spans, skipped=problems)


def load_kbench_spans(path: Path, name: str | None = None, source: FolderSource | None = None) -> Dataset:
    """``source`` sets include/exclude globs and the size cap for ``docs/`` (its root is ignored)."""
    docs_dir = path / "docs"
    if not is_inside(docs_dir, path):
        raise DatasetError(f"{docs_dir}: a link to {docs_dir.resolve()}, outside the dataset folder "
                           f"{path.resolve()}; kbench reads only files inside the dataset folder")
    source = FolderSource(docs_dir) if source is None else replace(source, root=docs_dir)
    loaded, skipped = source.load()  # loaders by type; empty/binary/undecodable/oversized files, links out skipped
    documents = {d.doc_id: d for d in loaded}
    skipped_docs = {relative: reason for reason, paths in skipped.items() for relative in paths}
    problems: Problems = dict(skipped)
    queries, spans, labels, first = [], {}, {}, {}
    for n, row in iter_jsonl(dataset_file(path, "questions.jsonl"), QUESTION_EXAMPLE):
        where = f"questions.jsonl:{n}"
        qid = get_id(row, "query_id", where)
        if qid in first:
            raise DatasetError(f"{where}: query_id {qid!r} repeats line {first[qid]}; give every question its own "
                               "query_id")
        first[qid] = n
        question = get_text(row, "question", where, required=True)
        checked, documents_only = [], {}
        refs = _references(row, where)
        if refs is None:  # not labelled yet: ranked by every run, scored once a judge or a person labels it
            if not question.strip():
                note(problems, EMPTY_QUERY, where)
            else:
                queries.append(Query(qid, question))
            continue
        for i, ref in enumerate(refs):
            at = f"{where} references[{i}]"
            doc_id = get_id(ref, "doc_id", at) if isinstance(ref, dict) else ""
            if is_document_label(ref):
                documents_only[check_document(documents, doc_id, at, skipped_docs)] = 1
            else:
                checked.append(check_reference(documents, doc_id, ref, at, skipped_docs))
        if not question.strip():
            note(problems, EMPTY_QUERY, where)
        elif not checked and not documents_only:
            note(problems, NO_REFERENCES, where)
        else:
            if checked:
                spans[qid] = checked
            if documents_only:
                labels[qid] = documents_only
            made = {k: row[k] for k in ("method", "stratum") if isinstance(row.get(k), str)}  # a generated set's
            queries.append(Query(qid, question, made))
    qrels = {} if not labels else {q.query_id: {**doc_qrels_from_spans({q.query_id: spans.get(q.query_id, [])})
                                                 .get(q.query_id, {}), **labels.get(q.query_id, {})}
                                    for q in queries if q.query_id in spans or q.query_id in labels}
    return Dataset(name or path.name, list(documents.values()), queries, qrels=qrels, spans=spans, skipped=problems)


def is_document_label(ref: Any) -> bool:
    """A reference naming a document and no range: ``{"doc_id": ...}`` (content, if given, is not checked)."""
    return isinstance(ref, dict) and "start_index" not in ref and "end_index" not in ref


def check_document(documents: dict[str, Document], doc_id: str, where: str, skipped: dict[str, str] | None) -> str:
    if doc_id not in documents:
        reason = (skipped or {}).get(doc_id)
        why = (f"{SKIP_HINT.get(reason, f'it was skipped as {reason}')}" if reason else
               "a file left out by dataset.include/exclude, or skipped as empty/binary/oversized?")
        raise DatasetError(f"{where}: reference names document {doc_id!r}, which is not in the corpus ({why})")
    return doc_id


def doc_qrels_from_spans(spans: dict[str, list[Span]]) -> dict[str, dict[str, int]]:
    """A document is relevant to a question when it holds one of its reference spans."""
    return {qid: {s.doc_id: 1 for s in refs} for qid, refs in spans.items()}
