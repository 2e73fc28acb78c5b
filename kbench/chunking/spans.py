"""Character-span helpers shared by the chunkers.

Chunkers work on ``(start, end)`` spans into ``document.text`` and build the chunk text from them last,
so every chunk's offsets are exact by construction rather than recovered by searching for the text.
"""
from __future__ import annotations

from typing import Any, Iterable

from kbench.records import Chunk, Document

Span = tuple[int, int]


def strip_span(text: str, start: int, end: int) -> Span:
    """The span of ``text[start:end].strip()`` (Python's notion of whitespace); empty -> (start, start)."""
    segment = text[start:end]
    lead = len(segment) - len(segment.lstrip())
    if lead == len(segment):
        return start, start
    trail = len(segment) - len(segment.rstrip())
    return start + lead, end - trail


def line_number(text: str, offset: int) -> int:
    """1-based line of character ``offset``."""
    return text.count("\n", 0, offset) + 1


def make_chunks(document: Document, pieces: Iterable[tuple[int, int, str, dict[str, Any]]]) -> list[Chunk]:
    """Number ``(start, end, text, metadata)`` pieces into chunks, dropping whitespace-only texts."""
    chunks: list[Chunk] = []
    for start, end, text, metadata in pieces:
        if text.strip():
            chunks.append(Chunk(document.doc_id, len(chunks), start, end, text, dict(metadata)))
    return chunks


def span_chunks(document: Document, spans: Iterable[Span], **metadata: Any) -> list[Chunk]:
    """Chunks whose text is exactly ``document.text[start:end]``."""
    text = document.text
    return make_chunks(document, ((s, e, text[s:e], metadata) for s, e in spans))
