"""BEIR layout: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv`` (header line, query-id corpus-id score).

Refused, with the file and line: a file that is not UTF-8, a line that is not a JSON object, a row without
its ``_id``, an id used twice (documents or queries), a qrels row without three tab-separated columns or
whose score is not a whole number, and the same judgement given two different scores.

Dropped, counted by reason in ``Dataset.skipped`` and refused under ``dataset.strict``: judgements naming a
query or document the files do not hold, judgements with score <= 0 (judged not relevant; metrics count only
scores > 0), repeated identical judgements, queries of the split whose text is empty, and queries left with
no relevant document (their metrics would be 0 for a fault of the data, not of retrieval).
"""
from __future__ import annotations

import csv
import re
from pathlib import Path

from kbench.datasets.reading import (EMPTY_QUERY, NO_RELEVANT_JUDGEMENT, QRELS_DUPLICATE, QRELS_NOT_RELEVANT,
                                     QRELS_UNKNOWN_DOCUMENT, QRELS_UNKNOWN_QUERY, DatasetError, Problems,
                                     dataset_file, get_id, get_text, iter_jsonl, iter_lines, json_type, note)
from kbench.errors import quoted_token
from kbench.records import Dataset, Document, Query

__all__ = ["DatasetError", "is_beir_folder", "judged_dataset", "load_beir", "read_qrels"]

CORPUS_EXAMPLE = '{"_id": "d1", "title": "...", "text": "..."}'
QUERY_EXAMPLE = '{"_id": "q1", "text": "..."}'


def is_beir_folder(path: Path) -> bool:
    return (path / "corpus.jsonl").is_file() and (path / "queries.jsonl").is_file()


def _grade(text: str) -> int | None:
    """A relevance grade: digits with an optional sign (``2.0`` too); ``nan``, ``1e3``, ``1_0`` are not grades."""
    match = re.fullmatch(r"([+-]?[0-9]+)(?:\.0*)?", text)
    return int(match.group(1)) if match else None


def read_qrels(path: Path) -> list[tuple[int, str, str, int]]:
    """(line, query id, document id, score) of every judgement; the header line is optional."""
    rows = []
    for n, line in iter_lines(path):
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        row = next(csv.reader([line], delimiter="\t"))
        if n == 1 and row and _grade(row[-1].strip()) is None:
            continue  # header (query-id corpus-id score)
        if len(row) != 3:
            raise DatasetError(f"{path}:{n}: {len(row)} tab-separated columns (got {quoted_token(line)}); a qrels line "
                               "is query-id<TAB>corpus-id<TAB>score")
        qid, did, score = (cell.strip() for cell in row)
        grade = _grade(score)
        if grade is None:
            raise DatasetError(f"{path}:{n}: score {quoted_token(score)} is not a whole number; the third column is "
                               "the relevance grade, e.g. 1")
        if not qid or not did:
            raise DatasetError(f"{path}:{n}: empty {'query-id' if not qid else 'corpus-id'}; every judgement names "
                               "a query and a document")
        rows.append((n, qid, did, grade))
    return rows


def _load_documents(path: Path) -> list[Document]:
    documents, first = [], {}
    for n, row in iter_jsonl(path, CORPUS_EXAMPLE):
        where = f"{path}:{n}"
        doc_id = get_id(row, "_id", where)
        if doc_id in first:
            raise DatasetError(f"{where}: document _id {doc_id!r} repeats line {first[doc_id]}; give every "
                               "document its own _id")
        first[doc_id] = n
        metadata = row.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise DatasetError(f"{where}: metadata must be an object (got {json_type(metadata)})")
        documents.append(Document(doc_id=doc_id, text=get_text(row, "text", where), title=get_text(row, "title", where),
                                  url=doc_id, doc_type="text", metadata=metadata))
    return documents


def _load_queries(path: Path) -> dict[str, tuple[int, Query]]:
    queries: dict[str, tuple[int, Query]] = {}
    for n, row in iter_jsonl(path, QUERY_EXAMPLE):
        where = f"{path}:{n}"
        qid = get_id(row, "_id", where)
        if qid in queries:
            raise DatasetError(f"{where}: query _id {qid!r} repeats line {queries[qid][0]}; give every query its "
                               "own _id")
        queries[qid] = (n, Query(qid, get_text(row, "text", where, required=True)))
    return queries


def load_beir(path: Path, split: str = "test", name: str | None = None) -> Dataset:
    qrels_file = path / "qrels" / f"{split}.tsv"
    if not qrels_file.is_file():
        splits = sorted(p.stem for p in (path / "qrels").glob("*.tsv"))
        raise DatasetError(f"dataset.split: no qrels/{split}.tsv in {path}; available splits: {splits or 'none'}")
    qrels_file = dataset_file(path, f"qrels/{split}.tsv")
    documents = _load_documents(dataset_file(path, "corpus.jsonl"))
    all_queries = _load_queries(dataset_file(path, "queries.jsonl"))
    return judged_dataset(name or path.name, documents, all_queries, read_qrels(qrels_file), qrels_file,
                          f"qrels/{split}.tsv", "queries.jsonl")


def judged_dataset(name: str, documents: list[Document], all_queries: dict[str, tuple[int, Query]],
                   judgements: list[tuple[int, str, str, int]], qrels_file: Path | str, qrels_label: str,
                   queries_label: str) -> Dataset:
    """The dataset of the judged queries, judgements checked and dropped as the module docstring says (shared by
    the BEIR files and the parquet/Arrow tables of ``kbench.datasets.tables``)."""
    doc_ids = {d.doc_id for d in documents}

    problems: Problems = {}
    qrels: dict[str, dict[str, int]] = {}
    judged: dict[tuple[str, str], tuple[int, int]] = {}  # (query, document) -> (score, line)
    judged_queries: set[str] = set()
    for n, qid, did, grade in judgements:
        where = f"{qrels_label}:{n}"
        if (qid, did) in judged:
            before, line = judged[(qid, did)]
            if before != grade:
                raise DatasetError(f"{qrels_file}:{n}: query {qid!r}, document {did!r} judged {grade} here and "
                                   f"{before} at line {line}; keep one judgement per pair")
            note(problems, QRELS_DUPLICATE, where)
            continue
        judged[(qid, did)] = (grade, n)
        if qid not in all_queries:
            note(problems, QRELS_UNKNOWN_QUERY, f"{where} (query {qid})")
            continue
        judged_queries.add(qid)
        if did not in doc_ids:
            note(problems, QRELS_UNKNOWN_DOCUMENT, f"{where} (document {did})")
            continue
        if grade <= 0:
            note(problems, QRELS_NOT_RELEVANT, where)
            continue
        qrels.setdefault(qid, {})[did] = grade

    queries = []
    for qid, (n, query) in all_queries.items():
        if qid not in judged_queries:
            continue  # a query of another split
        if not query.text.strip():
            note(problems, EMPTY_QUERY, f"{queries_label}:{n} (query {qid})")
            qrels.pop(qid, None)
        elif qid not in qrels:
            note(problems, NO_RELEVANT_JUDGEMENT, f"{queries_label}:{n} (query {qid})")
        else:
            queries.append(query)
    return Dataset(name, documents, queries, qrels=qrels, skipped=problems)
