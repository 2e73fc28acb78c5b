"""Runs and qrels in the formats other tools read: TREC run files, TREC qrels, ranx ``Qrels``.

TREC run: one line per retrieved item, ``qid Q0 docid rank score tag``; TREC qrels: ``qid 0 docid grade``.
Tools such as trec_eval and ranx order a query's items by score (not by the rank column), so a ``Run``'s
``to_dict`` makes scores strictly decreasing in kbench's order: an item whose score ties the one above it
is written a hair (1e-9) lower. A kbench run can be exported at two levels:

- ``doc``: each document at the rank of its best chunk, with that chunk's score; qrels are the dataset's
  document judgements (for span datasets: a document holding a reference span is relevant);
- ``chunk``: chunk ids (``<doc_id>#<n>``) with their scores; qrels mark every chunk that overlaps a reference
  span under the config's overlap rule (span datasets only).

``kbench.runner.import_trec_run`` goes the other way: it scores a run file from another system on a
config's dataset with kbench's own document-level metrics and logs it like a kbench run, so ``kbench
compare`` can test it against kbench configs query by query.
"""
from __future__ import annotations

import math
from pathlib import Path

from kbench.evaluation.relevance import relevant_chunks
from kbench.records import Chunk, Dataset, RankedHit, Run, chunks_by_doc
from kbench.errors import UserError


class TrecFormatError(UserError, ValueError):
    pass


# --------------------------------------------------------------------------- TREC files
def _check_id(value: str, what: str) -> str:
    value = str(value)
    if not value or any(ch.isspace() for ch in value):
        raise TrecFormatError(f"{what} {value!r} is empty or holds whitespace, which TREC files cannot carry")
    return value


def write_trec_run(run: dict[str, dict[str, float]], path: str | Path, tag: str = "kbench") -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tag = _check_id(tag, "run tag")
    with path.open("w", encoding="utf-8") as f:
        for qid in sorted(run):
            items = sorted(run[qid].items(), key=lambda kv: -kv[1])
            for rank, (doc_id, score) in enumerate(items, start=1):
                f.write(f"{_check_id(qid, 'query id')} Q0 {_check_id(doc_id, 'document id')} {rank} {score!r} {tag}\n")
    return path


def read_trec_run(path: str | Path) -> tuple[dict[str, dict[str, float]], str]:
    """A TREC run file -> ``({qid: {docid: score}}, tag)``; every line must have 6 fields and a numeric score."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"TREC run file not found: {path}")
    run: dict[str, dict[str, float]] = {}
    tag = ""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as e:
        line_no = path.read_bytes()[: e.start].count(b"\n") + 1
        raise TrecFormatError(f"{path}:{line_no}: not UTF-8 text ({e.reason}); save the run file as UTF-8") from None
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 6:
            raise TrecFormatError(f"{path}:{n}: expected 6 fields 'qid Q0 docid rank score tag', got {len(parts)}")
        qid, _, doc_id, _, score, tag = parts
        try:
            value = float(score)
        except ValueError:
            raise TrecFormatError(f"{path}:{n}: score {score!r} is not a number") from None
        if not math.isfinite(value):  # a NaN score has no place in a ranking; trec_eval would order it arbitrarily
            raise TrecFormatError(f"{path}:{n}: score {score!r} is not a finite number")
        if doc_id in run.setdefault(qid, {}):
            raise TrecFormatError(f"{path}:{n}: document {doc_id!r} listed twice for query {qid!r}")
        run[qid][doc_id] = value
    if not run:
        raise TrecFormatError(f"{path}: no run lines")
    return run, tag


def write_trec_qrels(qrels: dict[str, dict[str, int]], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for qid in sorted(qrels):
            for doc_id, grade in sorted(qrels[qid].items()):
                f.write(f"{_check_id(qid, 'query id')} 0 {_check_id(doc_id, 'document id')} {int(grade)}\n")
    return path


def read_trec_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with Path(path).open(encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 4:
                raise TrecFormatError(f"{path}:{n}: expected 4 fields 'qid 0 docid grade', got {len(parts)}")
            qrels.setdefault(parts[0], {})[parts[2]] = int(parts[3])
    return qrels


def ranked_ids(scores: dict[str, float]) -> list[str]:
    """Best first, as trec_eval orders a run: score descending, ties by id descending."""
    return [d for d, _ in sorted(scores.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)]


def run_from_trec(run: dict[str, dict[str, float]], name: str = "trec") -> Run:
    """A document-level ``{qid: {docid: score}}`` (a TREC file) as a Run, each query in trec_eval's order."""
    return Run({qid: [RankedHit(d, d, float(scores[d])) for d in ranked_ids(scores)] for qid, scores in run.items()},
               name)


# --------------------------------------------------------------------------- ranx
def to_ranx_qrels(qrels: dict[str, dict[str, int]]):
    from ranx import Qrels

    return Qrels({q: {d: int(g) for d, g in docs.items()} for q, docs in qrels.items() if docs})


# --------------------------------------------------------------------------- qrels of a kbench dataset
def chunk_qrels(dataset: Dataset, chunks: list[Chunk], overlap) -> dict[str, dict[str, int]]:
    """Span datasets: every chunk that overlaps a reference span of a query is relevant (grade 1)."""
    if not dataset.has_spans:
        raise ValueError("chunk-level qrels need a span dataset; this one has document qrels only (use level doc)")
    by_doc = chunks_by_doc(chunks)
    return {q.query_id: {chunks[i].chunk_id: 1 for i in relevant_chunks(chunks, dataset.spans.get(q.query_id, []),
                                                                        overlap, by_doc)}
            for q in dataset.queries}


def doc_qrels(dataset: Dataset) -> dict[str, dict[str, int]]:
    keep = {q.query_id for q in dataset.queries}
    return {q: dict(docs) for q, docs in dataset.qrels.items() if q in keep}
