"""Questions kept in MLflow: a GenAI evaluation dataset as a run's question set.

``kbench datasets publish`` writes a dataset's questions as MLflow evaluation-dataset records: ``inputs.question``,
``expectations.expected_retrieved_context`` (per reference span its document, offsets and text; per relevant
document of BEIR qrels its document and grade) and the tag ``kbench.query_id``. A config's
``dataset.questions_from: <evaluation dataset name or id>`` reads them back: the documents come from the
dataset (``name`` or ``path``), the questions and labels from MLflow, so a question set curated in MLflow's UI
is what a run scores. Labels naming a document the dataset does not hold, or offsets outside it, are left out
and counted as the folder loaders do; the run key hashes the records read.

MLflow's evaluation-dataset API reads the process-wide tracking URI, so ``fluent_tracking_uri`` sets it for
the call and restores it.
"""
from __future__ import annotations

import contextlib
from typing import Any

from kbench.datasets.reading import (EMPTY_QUERY, NO_REFERENCES, QRELS_UNKNOWN_DOCUMENT, DatasetError)
from kbench.errors import shorten
from kbench.hashing import stable_hash
from kbench.paths import tracking_uri, workspace_dir
from kbench.records import Dataset, Query, Span
from kbench.filter_strings import literal

QUERY_ID_TAG = "kbench.query_id"  # a record's tag naming the question it was published from
EXPECTED = "expected_retrieved_context"


def default_tracking_uri(uri: str | None) -> str:
    """``uri`` (a config fills it with the run's own store), else MLFLOW_TRACKING_URI, else the default workspace's
    store (as ``kbench runs`` reads it)."""
    return tracking_uri(uri, workspace_dir())


@contextlib.contextmanager
def fluent_tracking_uri(uri: str):
    """MLflow's module-level API (evaluation datasets, genai.evaluate) on ``uri`` for the block, then the
    previous setting again (MLflow's own helper, which also restores an unset URI)."""
    from mlflow.tracking._tracking_service.utils import _use_tracking_uri

    with _use_tracking_uri(uri):
        yield


def datasets_named(name: str, what: str) -> list:
    """The evaluation datasets called exactly ``name``, through the current tracking URI (``what`` names the
    argument in a refusal: ``literal`` quotes the name or refuses it, never pastes it into the filter)."""
    from mlflow.genai.datasets import search_datasets

    return [d for d in search_datasets(filter_string=f"name = {literal(name, what)}") if d.name == name]


def find_evaluation_dataset(reference: str):
    """An evaluation dataset by id (``d-...``) or name, through the current tracking URI; DatasetError if none."""
    from mlflow.genai.datasets import get_dataset

    if reference.startswith("d-"):
        try:
            return get_dataset(dataset_id=reference)
        except Exception:
            pass
    found = datasets_named(reference, "dataset.questions_from")
    if not found:
        raise DatasetError(f"dataset.questions_from: no MLflow evaluation dataset {reference!r}; publish one with "
                           "`kbench datasets publish DATASET --name NAME` or give an id (d-...)")
    if len(found) > 1:
        raise DatasetError(f"dataset.questions_from: {len(found)} evaluation datasets are named {reference!r} "
                           f"({', '.join(d.dataset_id for d in found)}); give one id")
    return found[0]


def question_records(reference: str, tracking_uri: str | None) -> list[dict[str, Any]]:
    """The dataset's records as plain dicts (query id, question, expectations), in a stable order."""
    with fluent_tracking_uri(default_tracking_uri(tracking_uri)):
        records = find_evaluation_dataset(reference).to_df().to_dict("records")
    rows = []
    for record in records:
        qid = (record["tags"] or {}).get(QUERY_ID_TAG) or record["dataset_record_id"]
        rows.append({"query_id": str(qid), "question": str((record["inputs"] or {}).get("question", "")),
                     "expected": list((record["expectations"] or {}).get(EXPECTED) or [])})
    return sorted(rows, key=lambda r: r["query_id"])


def questions_digest(reference: str, tracking_uri: str | None) -> str:
    """Hash of the records a run would read (for the run key)."""
    return stable_hash(question_records(reference, tracking_uri))


def checked_span(texts: dict[str, str], doc_id: str, entry: dict[str, Any], where: str) -> Span:
    """A record's span, checked against the documents as the span folder loader checks a reference
    (``spans.check_reference``): inside the document, and its text there the record's ``content``. A record
    publishes the first ``REFERENCE_CHARS`` of its text (kbench.tracking.run_records), so the content must start
    the text at the offsets: documents edited since publishing (a preface added) move every offset, and the
    spans would silently score other text."""
    try:
        start, end = int(entry["start"]), int(entry["end"])
    except (TypeError, ValueError):
        raise DatasetError(f"{where}: span offsets of {doc_id!r} are not whole numbers; fix the record in "
                           "MLflow") from None
    text = texts[doc_id]
    if not 0 <= start < end <= len(text):
        raise DatasetError(f"{where}: span [{start}:{end}] is outside document {doc_id!r} ({len(text)} characters); "
                           "fix the record in MLflow")
    content = entry.get("content")
    if content is not None and (not isinstance(content, str) or not content
                                or not text[start:end].startswith(content)):
        raise DatasetError(f"{where}: span [{start}:{end}] of {doc_id!r} does not match its content (the text there "
                           f"is {shorten(text[start:end], 60)}, content is {shorten(content, 60)}); the documents "
                           "changed since the questions were published: publish them again from these documents "
                           "(kbench datasets publish) or point dataset at the documents they were published from")
    return Span(doc_id, start, end)


def with_mlflow_questions(dataset: Dataset, reference: str, tracking_uri: str | None) -> Dataset:
    """``dataset``'s documents with the questions and labels of the MLflow evaluation dataset ``reference``."""
    texts = {d.doc_id: d.text for d in dataset.documents}
    skipped = {reason: list(paths) for reason, paths in dataset.skipped.items()}
    queries, spans, qrels = [], {}, {}
    for row in question_records(reference, tracking_uri):
        qid, where = row["query_id"], f"mlflow:{reference}:{row['query_id']}"
        if not row["question"].strip():
            skipped.setdefault(EMPTY_QUERY, []).append(where)
            continue
        found_spans, grades = [], {}
        for entry in row["expected"]:
            doc_id = str(entry.get("doc_uri", "")) if isinstance(entry, dict) else ""
            if doc_id not in texts:
                skipped.setdefault(QRELS_UNKNOWN_DOCUMENT, []).append(f"{where} {doc_id}")
                continue
            if "start" in entry and "end" in entry:
                found_spans.append(checked_span(texts, doc_id, entry, where))
            grades[doc_id] = max(grades.get(doc_id, 0), int(entry.get("grade", 1)))
        if not grades:
            skipped.setdefault(NO_REFERENCES, []).append(where)
            continue
        queries.append(Query(qid, row["question"]))
        qrels[qid] = grades
        if found_spans:
            spans[qid] = found_spans
    if not queries:
        raise DatasetError(f"dataset.questions_from: MLflow evaluation dataset {reference!r} has no question whose "
                           f"expected_retrieved_context names a document of {dataset.name!r}")
    return Dataset(dataset.name, dataset.documents, queries, qrels=qrels, spans=spans, skipped=skipped,
                   content_hash=dataset.content_hash)
