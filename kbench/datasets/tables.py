"""Datasets kept as tables: BEIR-style parquet or Hugging Face ``datasets`` folders, and AutoRAG's two files.

BEIR-style tables (what Hugging Face hosts for BEIR/MTEB, or ``Dataset.save_to_disk`` writes): a corpus
(``_id``, ``title``, ``text``), queries (``_id``, ``text``) and judgements (``query-id``, ``corpus-id``,
``score``) for the split, each as ``<name>.parquet`` or a folder ``<name>/`` of ``*.parquet`` or ``*.arrow``
files (any depth: a saved ``DatasetDict`` adds a folder per split)::

    corpus.parquet | corpus/...      queries.parquet | queries/...
    qrels/<split>.parquet | qrels/<split>/... | default/<split>/... (Hugging Face's parquet conversion)

Common spellings of the columns are accepted (``doc_id``/``id``, ``contents``, ``query_id``/``qid``,
``query``, ``corpus_id``, ``relevance``). The judgements go through the same checks and drops as BEIR's files
(``beir.judged_dataset``), so a grade of 0 is a judged-not-relevant document and grades 1–3 reach nDCG.

AutoRAG's layout: ``corpus.parquet`` (``doc_id``, ``contents``, ``metadata``) and ``qa.parquet`` (``qid``,
``query``, ``retrieval_gt``: a list of lists of relevant ``doc_id``s, ``generation_gt``); every document named
in ``retrieval_gt`` is relevant with grade 1.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from kbench.datasets.beir import judged_dataset
from kbench.datasets.reading import DatasetError, dataset_file
from kbench.errors import shorten
from kbench.records import Dataset, Document, Query

TABLE_SUFFIXES = (".parquet", ".arrow")
DOC_ID = ("_id", "doc_id", "id", "corpus-id", "corpus_id")
DOC_TEXT = ("text", "contents", "content")
QUERY_ID = ("_id", "query_id", "qid", "id", "query-id")
QUERY_TEXT = ("text", "query", "question")
QRELS_QUERY = ("query-id", "query_id", "qid")
QRELS_DOC = ("corpus-id", "corpus_id", "doc_id", "docid")
QRELS_SCORE = ("score", "relevance", "label", "grade")


def table_files(root: Path, name: str) -> list[Path]:
    """``name.parquet``, or every parquet/Arrow file under the folder ``name`` (sorted), each inside ``root``."""
    single = root / f"{name}.parquet"
    if single.is_file():
        return [dataset_file(root, f"{name}.parquet")]
    folder = root / name
    if not folder.is_dir():
        return []
    found = sorted(p for p in folder.rglob("*") if p.suffix in TABLE_SUFFIXES and p.is_file())
    return [dataset_file(root, p.relative_to(root).as_posix()) for p in found]


def read_rows(files: list[Path]) -> list[dict[str, Any]]:
    """Every row of the files, in order. Arrow files are what ``datasets`` writes (an IPC stream)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows: list[dict[str, Any]] = []
    for path in files:
        try:
            if path.suffix == ".parquet":
                table = pq.read_table(path)
            else:
                with pa.memory_map(str(path)) as source:
                    try:
                        table = pa.ipc.open_stream(source).read_all()
                    except pa.ArrowInvalid:
                        source.seek(0)
                        table = pa.ipc.open_file(source).read_all()
        except (OSError, pa.ArrowException) as e:
            raise DatasetError(f"{path}: not a readable {path.suffix[1:]} table ({e})") from None
        rows.extend(table.to_pylist())
    return rows


def column(row: dict[str, Any], names: tuple[str, ...], where: str, what: str) -> Any:
    for name in names:
        if name in row:
            return row[name]
    raise DatasetError(f"{where}: no {what} column; expected one of {', '.join(names)} (columns: "
                       f"{shorten(list(row), 120)})")


def _id(value: Any, where: str, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)) or not str(value).strip():
        raise DatasetError(f"{where}: {what} must be a non-empty string or integer (got {shorten(value)})")
    return str(value)


def _text(value: Any, where: str, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DatasetError(f"{where}: {what} must be text (got {shorten(value)})")
    return value


def _grade(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or int(value) != value:
        raise DatasetError(f"{where}: the relevance score must be a whole number (got {shorten(value)})")
    return int(value)


def _documents(rows: list[dict[str, Any]], label: str) -> list[Document]:
    documents, first = [], {}
    for n, row in enumerate(rows, start=1):
        where = f"{label} row {n}"
        doc_id = _id(column(row, DOC_ID, where, "document id"), where, "the document id")
        if doc_id in first:
            raise DatasetError(f"{where}: document id {doc_id!r} repeats row {first[doc_id]}; give every document "
                               "its own id")
        first[doc_id] = n
        metadata = row.get("metadata") if isinstance(row.get("metadata"), dict) else {}
        documents.append(Document(doc_id=doc_id, text=_text(column(row, DOC_TEXT, where, "text"), where, "text"),
                                  title=_text(row.get("title"), where, "title"), url=doc_id, doc_type="text",
                                  metadata=metadata))
    return documents


def _queries(rows: list[dict[str, Any]], label: str) -> dict[str, tuple[int, Query]]:
    queries: dict[str, tuple[int, Query]] = {}
    for n, row in enumerate(rows, start=1):
        where = f"{label} row {n}"
        qid = _id(column(row, QUERY_ID, where, "query id"), where, "the query id")
        if qid in queries:
            raise DatasetError(f"{where}: query id {qid!r} repeats row {queries[qid][0]}; give every query its own id")
        queries[qid] = (n, Query(qid, _text(column(row, QUERY_TEXT, where, "query text"), where, "the query text")))
    return queries


def is_table_beir_folder(path: Path) -> bool:
    return bool(table_files(path, "corpus")) and bool(table_files(path, "queries"))


def load_table_beir(path: Path, split: str = "test", name: str | None = None) -> Dataset:
    qrels_files = next((found for candidate in (f"qrels/{split}", f"default/{split}")
                        if (found := table_files(path, candidate))), [])
    if not qrels_files:
        raise DatasetError(f"dataset.split: no judgements for split {split!r} in {path}; expected "
                           f"qrels/{split}.parquet or a folder qrels/{split}/ (or default/{split}/) of parquet or "
                           "Arrow files with query-id, corpus-id, score")
    label = qrels_files[0].relative_to(path).as_posix()
    judgements = []
    for n, row in enumerate(read_rows(qrels_files), start=1):
        where = f"{label} row {n}"
        judgements.append((n, _id(column(row, QRELS_QUERY, where, "query id"), where, "the query id"),
                           _id(column(row, QRELS_DOC, where, "document id"), where, "the document id"),
                           _grade(column(row, QRELS_SCORE, where, "score"), where)))
    documents = _documents(read_rows(table_files(path, "corpus")), "corpus")
    queries = _queries(read_rows(table_files(path, "queries")), "queries")
    return judged_dataset(name or path.name, documents, queries, judgements, label, label, "queries")


def is_autorag_folder(path: Path) -> bool:
    return (path / "corpus.parquet").is_file() and (path / "qa.parquet").is_file()


def load_autorag(path: Path, name: str | None = None) -> Dataset:
    """AutoRAG's corpus.parquet and qa.parquet; every document in a question's ``retrieval_gt`` is relevant."""
    documents = _documents(read_rows([dataset_file(path, "corpus.parquet")]), "corpus.parquet")
    queries, judgements = {}, []
    for n, row in enumerate(read_rows([dataset_file(path, "qa.parquet")]), start=1):
        where = f"qa.parquet row {n}"
        qid = _id(column(row, ("qid", "query_id"), where, "qid"), where, "qid")
        if qid in queries:
            raise DatasetError(f"{where}: qid {qid!r} repeats row {queries[qid][0]}; give every question its own qid")
        queries[qid] = (n, Query(qid, _text(column(row, ("query",), where, "query"), where, "query")))
        groups = column(row, ("retrieval_gt",), where, "retrieval_gt")
        if not isinstance(groups, (list, tuple)) or not all(isinstance(g, (list, tuple)) for g in groups):
            raise DatasetError(f"{where}: retrieval_gt must be a list of lists of doc_id (got {shorten(groups)})")
        for group in groups:
            for doc_id in group:
                judgements.append((n, qid, _id(doc_id, where, "a retrieval_gt doc_id"), 1))
    seen, unique = set(), []
    for judgement in judgements:  # a document in two groups of one question is one judgement
        if judgement[1:3] not in seen:
            seen.add(judgement[1:3])
            unique.append(judgement)
    return judged_dataset(name or path.name, documents, queries, unique, path / "qa.parquet", "qa.parquet",
                          "qa.parquet")
