"""``recursive``: the Chroma RAG's recursive text splitter (1000/200; paragraphs, lines, sentences, words).

It behaves like LangChain's ``RecursiveCharacterTextSplitter`` (the tests compare chunk texts with it on
real text), but works on spans, so every chunk's offsets are exact instead of found again by searching:

1. Pick the first separator in the list that occurs in the text (the rest are kept for recursion).
2. Split on it. With ``keep_separator: start`` (LangChain's default) each separator begins the piece after
   it, so a sentence split leaves ``". Next sentence"``; with ``end`` it ends the piece before it.
3. Pieces shorter than ``chunk_size`` are merged greedily into chunks of at most ``chunk_size``; when a
   chunk is full the next one starts with trailing pieces of it totalling at most ``chunk_overlap``
   characters (LangChain's popping rule, reproduced as is).
4. A piece of ``chunk_size`` or more is split again with the remaining separators; with none left it is
   kept whole, so a run of text with no separator (a long URL, a word) can exceed ``chunk_size``.
5. Merged chunks are whitespace-stripped and empty ones dropped; a piece kept whole in step 4 is not
   stripped (LangChain's quirk: it may start with its separator, e.g. a space).

Size limit: every chunk is at most ``chunk_size`` characters unless it contains no separator of the list.
"""
from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, model_validator

from kbench.chunking.registry import CHUNKERS
from kbench.chunking.spans import Span, span_chunks, strip_span
from kbench.records import Chunk, Document
from kbench.registry import StrictModel, in_unit

CHROMA_RAG_SEPARATORS = ["\n\n", "\n", ". ", " "]


class RecursiveParams(StrictModel):
    chunk_size: int = Field(1000, ge=1, description="characters per chunk at most (see the size limit)",
                            json_schema_extra=in_unit("characters"))
    chunk_overlap: int = Field(200, ge=0, description="characters of the previous chunk repeated, at most",
                               json_schema_extra=in_unit("characters"))
    separators: list[str] = Field(default_factory=lambda: list(CHROMA_RAG_SEPARATORS), min_length=1,
                                  description="literal separators, tried in order; '' splits characters")
    keep_separator: Literal["start", "end", "none"] = Field(
        "start", description="the separator begins the next piece (LangChain default), ends the last, or is dropped")

    @model_validator(mode="after")
    def _overlap_below_size(self):
        if self.chunk_overlap > self.chunk_size:
            raise ValueError(f"chunk_overlap ({self.chunk_overlap}) must not exceed chunk_size ({self.chunk_size})")
        return self


def _split(text: str, lo: int, hi: int, separator: str, keep: str) -> list[Span]:
    """Pieces of ``text[lo:hi]`` split on a literal separator, as LangChain's ``_split_text_with_regex``."""
    if not separator:
        return [(i, i + 1) for i in range(lo, hi)]
    pieces, cut = [], lo
    for m in re.finditer(re.escape(separator), text[lo:hi]):
        s, e = lo + m.start(), lo + m.end()
        if keep == "start":
            pieces.append((cut, s))
            cut = s
        elif keep == "end":
            pieces.append((cut, e))
            cut = e
        else:
            pieces.append((cut, s))
            cut = e
    pieces.append((cut, hi))
    return [(s, e) for s, e in pieces if e > s]


def _merge(text: str, splits: list[Span], separator_len: int, params: RecursiveParams) -> list[Span]:
    """LangChain's ``_merge_splits`` on spans: consecutive splits joined, overlap kept by popping the front."""
    size, overlap = params.chunk_size, params.chunk_overlap
    out: list[Span] = []
    current: list[Span] = []
    total = 0
    for split in splits:
        length = split[1] - split[0]
        if total + length + (separator_len if current else 0) > size:
            if current:
                span = strip_span(text, current[0][0], current[-1][1])
                if span[1] > span[0]:
                    out.append(span)
                while total > overlap or (total + length + (separator_len if current else 0) > size and total > 0):
                    total -= (current[0][1] - current[0][0]) + (separator_len if len(current) > 1 else 0)
                    current = current[1:]
        current.append(split)
        total += length + (separator_len if len(current) > 1 else 0)
    if current:
        span = strip_span(text, current[0][0], current[-1][1])
        if span[1] > span[0]:
            out.append(span)
    return out


def recursive_spans(text: str, lo: int, hi: int, params: RecursiveParams,
                    separators: list[str] | None = None) -> list[Span]:
    """Chunk spans of ``text[lo:hi]`` by the recursive rules (offsets into ``text``)."""
    separators = params.separators if separators is None else separators
    separator, remaining = separators[-1], []
    for i, candidate in enumerate(separators):
        if not candidate:
            separator = candidate
            break
        if candidate in text[lo:hi]:
            separator, remaining = candidate, separators[i + 1:]
            break
    keep = params.keep_separator
    separator_len = 0 if keep != "none" else len(separator)
    out: list[Span] = []
    good: list[Span] = []
    for s, e in _split(text, lo, hi, separator, keep):
        if e - s < params.chunk_size:
            good.append((s, e))
            continue
        if good:
            out.extend(_merge(text, good, separator_len, params))
            good = []
        if remaining:
            out.extend(recursive_spans(text, s, e, params, remaining))
        else:
            out.append((s, e))  # kept whole and, as in LangChain, not stripped
    if good:
        out.extend(_merge(text, good, separator_len, params))
    return out


@CHUNKERS.register("recursive", RecursiveParams)
def recursive_chunks(document: Document, params: RecursiveParams) -> list[Chunk]:
    """The Chroma RAG's recursive splitter: paragraphs, lines, sentences, words; 1000 chars, 200 overlap."""
    return span_chunks(document, recursive_spans(document.text, 0, len(document.text), params))
