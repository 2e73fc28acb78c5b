"""Slices: a label per query so every metric can be read (and compared) per group of queries.

``evaluation.slices`` names the labels; each becomes a per-query column ``slice_<key>``:

- ``doc_type``: the type of the query's relevant documents (code, markdown, openapi, text, ...; ``mixed``
  when they differ, ``none`` when the query has none judged),
- ``corpus``: their ``source_id`` (the corpus file of a span dataset, the source of a folder), same rules,
- ``query_length``: ``short`` (up to 5 words), ``medium`` (6 to 12) or ``long`` (13 and more),
- ``language``: the question's language, an ISO 639-1 code (``fr``; ``und`` when too short to tell): its
  metadata's ``language``, else detected (kbench/language; a run passes its census's, judged among the corpus's
  languages, and adds the column by itself when two or more languages each hold a meaningful share),
- ``query.<field>``: a field of the query's metadata (``missing`` when absent),
- ``doc.<field>``: a field of the relevant documents' metadata (same rules as doc_type).

A query's relevant documents are its judged documents (grade > 0) and the documents of its reference spans.
``slice_table`` gives every numeric metric's mean per slice value, with the number of queries.
"""
from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from kbench.language.detect import detect_language
from kbench.records import Dataset, Document, Query

SHORT_QUERY_WORDS, LONG_QUERY_WORDS = 5, 13


def query_length_bucket(text: str) -> str:
    words = len(text.split())
    return "short" if words <= SHORT_QUERY_WORDS else "long" if words >= LONG_QUERY_WORDS else "medium"


def _one_label(values: Iterable[object]) -> str:
    found = sorted({str(v) for v in values})
    return "none" if not found else found[0] if len(found) == 1 else "mixed"


def relevant_documents(dataset: Dataset, query_id: str, by_id: dict[str, Document]) -> list[Document]:
    ids = [d for d, g in dataset.qrels.get(query_id, {}).items() if g > 0]
    ids += [s.doc_id for s in dataset.spans.get(query_id, [])]
    return [by_id[d] for d in dict.fromkeys(ids) if d in by_id]


def slice_label(key: str, query: Query, documents: list[Document]) -> str:
    """The label of one query under slice ``key`` (one of evaluation.slices)."""
    if key == "doc_type":
        return _one_label(d.doc_type for d in documents)
    if key == "corpus":
        return _one_label(d.source_id or d.doc_id for d in documents)
    if key == "query_length":
        return query_length_bucket(query.text)
    if key == "language":
        return str(query.metadata.get("language") or detect_language(query.text))
    scope, field = key.split(".", 1)
    if scope == "query":
        value = query.metadata.get(field)
        return "missing" if value is None else str(value)
    return _one_label(d.metadata[field] for d in documents if d.metadata.get(field) is not None)


def slice_problem(dataset: Dataset, slices: list[str]) -> str | None:
    """Why a ``query.<field>`` or ``doc.<field>`` slice would put every question in one slice (``missing``, or
    ``none``): no question (no document) of the dataset carries the field. None when each names a field there."""
    for key in slices:
        scope, _, name = key.partition(".")
        if scope not in ("query", "doc") or not name:
            continue
        records = dataset.queries if scope == "query" else dataset.documents
        if any(name in r.metadata for r in records):
            continue
        fields = sorted({f for r in records for f in r.metadata})
        what = "question" if scope == "query" else "document"
        return (f"evaluation.slices: {key}: no {what} of dataset {dataset.name} has the metadata field {name!r}, so "
                f"every question would fall in one slice; its {what}s' fields: "
                f"{', '.join(fields[:20]) + (' ...' if len(fields) > 20 else '') if fields else 'none'}")
    return None


def slice_columns(dataset: Dataset, slices: list[str]) -> dict[str, dict[str, str]]:
    """``{"slice_<key>": {query_id: label}}`` for every key of ``slices`` (``language`` detects each question
    by itself; a run replaces it with its census's, kbench.language.run.RunLanguages.question_languages)."""
    by_id = {d.doc_id: d for d in dataset.documents}
    out: dict[str, dict[str, str]] = {f"slice_{key}": {} for key in slices}
    for query in dataset.queries:
        documents = relevant_documents(dataset, query.query_id, by_id)
        for key in slices:
            out[f"slice_{key}"][query.query_id] = slice_label(key, query, documents)
    return out


def slice_table(per_query: pd.DataFrame, key: str, metrics: list[str] | None = None) -> pd.DataFrame:
    """Mean of every numeric metric (or of ``metrics``) per label of slice ``key``, with ``n_queries``; one row
    per label, the largest slices first, and a last row ``(all)`` over every query."""
    column = key if key.startswith("slice_") else f"slice_{key}"
    if column not in per_query:
        raise KeyError(f"no slice column {column!r}; add {column[6:]!r} to evaluation.slices")
    numeric = [c for c in per_query.select_dtypes("number").columns if c != "n_results"]
    metrics = metrics or numeric
    grouped = per_query.groupby(column)[metrics]
    table = grouped.mean()
    table.insert(0, "n_queries", grouped.size())
    table = table.sort_values("n_queries", ascending=False, kind="stable")
    total = per_query[metrics].mean().to_frame("(all)").T
    total.insert(0, "n_queries", len(per_query))
    return pd.concat([table, total]).rename_axis(column)
