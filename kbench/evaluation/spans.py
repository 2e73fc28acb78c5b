"""Span metrics: how many of the retrieved characters are the reference answer, and how much of it.

Chunk-level metrics cannot tell two chunkers apart when both return "the chunk with the answer": one
chunk may be the answer, the other the answer plus three pages. Chroma's chunking-evaluation study
("Evaluating Chunking Strategies for Retrieval", the source of ``chroma_chunking``) scores the
characters instead. For one question with reference spans and a ranked list of chunks:

- ``R`` = the union of the question's reference character ranges (per document),
- ``C_k`` = the union of the character ranges ``[chunk.start, chunk.end)`` of the top ``k`` chunks
  (all of them when the retriever returned fewer than ``k``: retrieval.top_k caps the list),
- ``C_omega`` = the union of the ranges of *every* chunk in the index that overlaps ``R`` by at least
  one character.

Ranges in different documents never overlap; ``|X|`` counts characters. Then, per question:

- ``span_recall_at_k    = |C_k ∩ R| / |R|``
- ``span_precision_at_k = |C_k ∩ R| / |C_k|``           (0 when nothing was retrieved)
- ``span_iou_at_k       = |C_k ∩ R| / |C_k ∪ R|``
- ``span_precision_omega = |C_omega ∩ R| / |C_omega|``   (0 when no chunk overlaps R): the precision of
  a perfect retriever that returns exactly the chunks sharing a character with the answer. It depends
  on the chunking alone, so it shows how much non-answer text a chunker packs around an answer (the
  ceiling of span precision at full recall; with overlapping chunks a cleverer subset can beat it).

and each is averaged over questions (a question without reference spans gets NaN, which the mean skips).
Chroma calls these "token-level" but computes them on character offsets, as here. A chunk's range is
its source range in the document (``Chunk.start/end``), even when its embedded text differs (stripped,
or prefixed with a class signature).

Where this differs from Chroma's reference code, on purpose: Chroma sums the lengths of the retrieved
chunks without merging them (overlapping chunks, e.g. 1000/200 windows, count their shared characters
twice in the precision and IoU denominators); its omega adds reference characters that no chunk covers
to the denominator and counts a chunk that merely touches a reference (ends where it starts). Here every
set is a true union and overlap means a shared character, so the numbers mean what the formulas say.
With non-overlapping chunks the recall, precision and IoU agree exactly with Chroma's code, and omega
agrees whenever no chunk merely touches a reference (tests/evaluation/test_spans.py checks both on real
Chroma questions).
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from kbench.records import Chunk, Span

Ranges = dict[str, list[tuple[int, int]]]  # doc_id -> sorted, disjoint [start, end) ranges


def merge_ranges(ranges: Iterable[tuple[str, int, int]]) -> Ranges:
    """Union of (doc_id, start, end) ranges: per document, sorted and disjoint (touching ranges join)."""
    by_doc: dict[str, list[tuple[int, int]]] = {}
    for doc_id, start, end in ranges:
        if end > start:
            by_doc.setdefault(doc_id, []).append((start, end))
    merged: Ranges = {}
    for doc_id, items in by_doc.items():
        items.sort()
        out = [items[0]]
        for start, end in items[1:]:
            last_start, last_end = out[-1]
            if start <= last_end:
                out[-1] = (last_start, max(last_end, end))
            else:
                out.append((start, end))
        merged[doc_id] = out
    return merged


def total_length(ranges: Ranges) -> int:
    return sum(end - start for items in ranges.values() for start, end in items)


def intersection_length(a: Ranges, b: Ranges) -> int:
    """Characters in both unions (a two-pointer sweep per shared document)."""
    total = 0
    for doc_id in a.keys() & b.keys():
        xs, ys = a[doc_id], b[doc_id]
        i = j = 0
        while i < len(xs) and j < len(ys):
            lo, hi = max(xs[i][0], ys[j][0]), min(xs[i][1], ys[j][1])
            if hi > lo:
                total += hi - lo
            if xs[i][1] < ys[j][1]:
                i += 1
            else:
                j += 1
    return total


def chunk_ranges(chunks: Iterable[Chunk]) -> Ranges:
    return merge_ranges((c.doc_id, c.start, c.end) for c in chunks)


def span_ranges(spans: Iterable[Span]) -> Ranges:
    return merge_ranges((s.doc_id, s.start, s.end) for s in spans)


@dataclass(frozen=True)
class SpanScores:
    recall: float
    precision: float
    iou: float


def span_scores(retrieved: Ranges, reference: Ranges) -> SpanScores:
    """Recall, precision and IoU of retrieved character ranges against reference ranges (both unions)."""
    ref_len, ret_len = total_length(reference), total_length(retrieved)
    if ref_len == 0:
        return SpanScores(math.nan, math.nan, math.nan)
    inter = intersection_length(retrieved, reference)
    return SpanScores(
        recall=inter / ref_len,
        precision=inter / ret_len if ret_len else 0.0,
        iou=inter / (ret_len + ref_len - inter),
    )


def precision_omega(chunks: Iterable[Chunk], reference: Ranges) -> float:
    """Precision of the union of every chunk that overlaps the reference (0 if none does).

    ``chunks`` may be the whole index or just the candidates from the reference's documents; chunks
    elsewhere cannot overlap and are ignored.
    """
    if total_length(reference) == 0:
        return math.nan
    touching = [c for c in chunks if intersection_length(chunk_ranges([c]), reference) > 0]
    omega = chunk_ranges(touching)
    size = total_length(omega)
    return intersection_length(omega, reference) / size if size else 0.0


def reference_coverage(retrieved: Ranges, spans: list[Span]) -> list[float]:
    """Per reference span, the fraction of its characters inside the retrieved ranges (for miss analysis)."""
    out = []
    for s in spans:
        length = s.end - s.start
        out.append(intersection_length(retrieved, span_ranges([s])) / length if length > 0 else 0.0)
    return out


def span_metric_row(spans: list[Span], ranked_chunks: list[Chunk], candidates: Iterable[Chunk],
                    ks: list[int]) -> dict[str, object]:
    """One query's span columns: ``span_{recall,precision,iou}_at_<k>``, ``span_precision_omega``,
    ``spans_covered`` (per reference, the fraction inside the top max(k)) and ``span_refs``.

    ``ranked_chunks`` are the retrieved chunks best first; ``candidates`` every indexed chunk of the
    reference documents (for omega).
    """
    reference = span_ranges(spans)
    row: dict[str, object] = {}
    for k in ks:
        scores = span_scores(chunk_ranges(ranked_chunks[:k]), reference)
        row[f"span_recall_at_{k}"] = scores.recall
        row[f"span_precision_at_{k}"] = scores.precision
        row[f"span_iou_at_{k}"] = scores.iou
    row["span_precision_omega"] = precision_omega(candidates, reference)
    row["spans_covered"] = reference_coverage(chunk_ranges(ranked_chunks[: max(ks)]), spans)
    row["span_refs"] = [{"doc_id": s.doc_id, "start": s.start, "end": s.end} for s in spans]
    return row


def reference_table(per_query, dataset):
    """One row per (question, reference span) from a run's per-query table, for reading misses.

    Columns: query_id, question, doc_id, start, end, hit_rank (rank of the first chunk that hits it under
    evaluation.overlap, 0 = missed within the top max(k)), covered (fraction of its characters retrieved
    in the top max(k)) and text (the reference itself). ``per_query`` is RunResult.per_query or a run's
    per_query.parquet; ``dataset`` the run's Dataset (for the question and reference texts).
    """
    import pandas as pd

    questions = {q.query_id: q.text for q in dataset.queries}
    texts = {d.doc_id: d.text for d in dataset.documents}
    rows = []
    for _, r in per_query.iterrows():
        refs = r.get("span_refs")
        if refs is None:
            continue
        hits = list(r["spans_hit"]) if "spans_hit" in r and r["spans_hit"] is not None else [None] * len(refs)
        for ref, hit, covered in zip(refs, hits, r["spans_covered"]):
            doc_id, start, end = ref["doc_id"], int(ref["start"]), int(ref["end"])
            rows.append({"query_id": r["query_id"], "question": questions.get(r["query_id"], ""),
                         "doc_id": doc_id, "start": start, "end": end,
                         "hit_rank": None if hit is None else int(hit), "covered": float(covered),
                         "text": texts.get(doc_id, "")[start:end]})
    return pd.DataFrame(rows, columns=["query_id", "question", "doc_id", "start", "end", "hit_rank", "covered",
                                       "text"])
