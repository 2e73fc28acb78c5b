"""Which retrieved chunks count as relevant: document qrels, or overlap with reference character spans."""
from __future__ import annotations

from kbench.evaluation.config import OverlapRule
from kbench.records import Chunk, Span


def overlap_chars(chunk: Chunk, span: Span) -> int:
    if chunk.doc_id != span.doc_id:
        return 0
    return max(0, min(chunk.end, span.end) - max(chunk.start, span.start))


def chunk_matches_span(chunk: Chunk, span: Span, rule: OverlapRule) -> bool:
    """Does ``chunk`` count as a hit for ``span`` under ``rule`` (evaluation.overlap)?

    - ``any``: at least one shared character.
    - ``min_chars``: at least ``value`` shared characters, or the whole reference when it is shorter than
      ``value`` (otherwise a 40-character answer could never be hit under ``min_chars: 100``; Chroma's
      references run from 22 characters up).
    - ``min_fraction``: at least ``value`` of the reference's characters (a reference longer than any
      chunk can then only be hit when ``value`` is small enough).
    Touching ranges (one ends where the other starts) share no character and never match.
    """
    return overlap_meets_rule(overlap_chars(chunk, span), span, rule)


def overlap_meets_rule(n: int, span: Span, rule: OverlapRule) -> bool:
    """Do ``n`` characters of ``span``, retrieved, satisfy ``rule`` (see chunk_matches_span)?"""
    if n <= 0:
        return False
    if rule.rule == "any":
        return True
    if rule.rule == "min_chars":
        return n >= min(rule.value, span.end - span.start)
    return n >= rule.value * (span.end - span.start)


def relevant_chunks(chunks: list[Chunk], spans: list[Span], rule: OverlapRule,
                    chunks_by_doc: dict[str, list[int]]) -> set[int]:
    """Indexes of every chunk that matches one of ``spans`` (the ideal set for chunk-level metrics)."""
    found = set()
    for span in spans:
        for i in chunks_by_doc.get(span.doc_id, ()):
            if chunk_matches_span(chunks[i], span, rule):
                found.add(i)
    return found
