"""Which retrieved chunks count as relevant: document qrels, or overlap with reference character spans."""
from __future__ import annotations

from kbench.config import OverlapRule
from kbench.records import Chunk, Span


def overlap_chars(chunk: Chunk, span: Span) -> int:
    if chunk.doc_id != span.doc_id:
        return 0
    return max(0, min(chunk.end, span.end) - max(chunk.start, span.start))


def chunk_matches_span(chunk: Chunk, span: Span, rule: OverlapRule) -> bool:
    n = overlap_chars(chunk, span)
    if rule.rule == "any":
        return n > 0
    if rule.rule == "min_chars":
        return n > 0 and n >= rule.value
    return n > 0 and n >= rule.value * (span.end - span.start)


def relevant_chunks(chunks: list[Chunk], spans: list[Span], rule: OverlapRule,
                    chunks_by_doc: dict[str, list[int]]) -> set[int]:
    """Indexes of every chunk that matches one of ``spans`` (the ideal set for chunk-level metrics)."""
    found = set()
    for span in spans:
        for i in chunks_by_doc.get(span.doc_id, ()):
            if chunk_matches_span(chunks[i], span, rule):
                found.add(i)
    return found
