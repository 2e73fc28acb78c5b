"""``paragraph``: one chunk per paragraph (the GWI spec's paragraph strategy).

Paragraphs are the text between blank lines (a line holding only whitespace counts as blank). A
paragraph shorter than ``min_chars`` is joined with the following ones while the joined range stays within
``max_chars`` (the chunk is the covering range, its blank lines included). A paragraph longer than
``max_chars`` is split by the recursive rules (lines, sentences, words) without overlap.
Size limit: at most ``max_chars`` unless a piece holds no line break, sentence end or space.
"""
from __future__ import annotations

import re

from pydantic import Field

from kbench.chunking.recursive import RecursiveParams, recursive_spans
from kbench.chunking.registry import CHUNKERS
from kbench.chunking.spans import Span, span_chunks, strip_span
from kbench.records import Chunk, Document
from kbench.registry import StrictModel

BLANK_LINES = re.compile(r"\n[^\S\n]*\n\s*")


class ParagraphParams(StrictModel):
    max_chars: int = Field(1000, ge=1, description="characters; longer paragraphs are split")
    min_chars: int = Field(100, ge=0, description="characters; shorter paragraphs join the next ones")


def paragraph_spans(text: str) -> list[Span]:
    spans, cut = [], 0
    for m in BLANK_LINES.finditer(text):
        spans.append(strip_span(text, cut, m.start()))
        cut = m.end()
    spans.append(strip_span(text, cut, len(text)))
    return [(s, e) for s, e in spans if e > s]


@CHUNKERS.register("paragraph", ParagraphParams)
def paragraph_chunks(document: Document, params: ParagraphParams) -> list[Chunk]:
    """One chunk per paragraph; short ones joined forward, long ones split by lines and sentences."""
    text = document.text
    splitter = RecursiveParams(chunk_size=params.max_chars, chunk_overlap=0, separators=["\n", ". ", " "])
    out: list[Span] = []
    current: Span | None = None
    for s, e in paragraph_spans(text):
        if current is not None:
            if e - current[0] <= params.max_chars:
                current = (current[0], e)
                if e - current[0] >= params.min_chars:
                    out.append(current)
                    current = None
                continue
            out.append(current)
            current = None
        if e - s > params.max_chars:
            out.extend(recursive_spans(text, s, e, splitter))
        elif e - s < params.min_chars:
            current = (s, e)
        else:
            out.append((s, e))
    if current is not None:
        out.append(current)
    return span_chunks(document, out)
