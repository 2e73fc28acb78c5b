"""``markdown``: section-aware chunking of markdown (the GWI spec's "semantic" strategy).

- Sections start at ATX headings (``#`` .. ``######``) of level ``max_depth`` or shallower; deeper
  headings stay inside their section. Lines in fenced code blocks (``` or ~~~) are never headings, so a
  Python ``# comment`` in a code sample does not split a section. Text before the first heading is a
  section of level 0 titled by the document title.
- A section made of its heading line only (``# Guide`` directly followed by ``## Install``) is joined
  to the next section when ``merge_heading_only`` is on, so no chunk is a bare heading.
- A section of at most ``chunk_size`` characters (after stripping) is one chunk, kept whole. A longer one
  is split inside its own range by the recursive rules (``chunk_size``, ``chunk_overlap``, the separators
  of the Chroma RAG); every part carries the section's heading metadata.
- Metadata: ``title`` (the heading text), ``header_level`` (1-6; 0 before the first heading),
  ``parent_section`` (the ancestors' titles joined with " > "), ``heading_path`` (ancestors + title),
  ``section_part`` / ``section_parts``.

Defaults: the GWI spec sets documentation chunks to 500 tokens with 50 overlap; at about four characters a
token that is ``chunk_size: 2000`` and ``chunk_overlap: 200`` characters. Size limit: as ``recursive``
(at most ``chunk_size`` unless a piece holds no separator).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import Field

from kbench.chunking.recursive import CHROMA_RAG_SEPARATORS, RecursiveParams, recursive_spans
from kbench.chunking.registry import CHUNKERS
from kbench.chunking.spans import make_chunks, strip_span
from kbench.records import Chunk, Document
from kbench.registry import StrictModel, in_unit

ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


class MarkdownParams(StrictModel):
    max_depth: int = Field(3, ge=1, le=6, description="headings of this level or shallower start a section",
                           json_schema_extra=in_unit("heading level"))
    chunk_size: int = Field(2000, ge=1, description="characters; longer sections are split",
                            json_schema_extra=in_unit("characters"))
    chunk_overlap: int = Field(200, ge=0, description="characters repeated between parts of a long section",
                               json_schema_extra=in_unit("characters"))
    separators: list[str] = Field(default_factory=lambda: list(CHROMA_RAG_SEPARATORS), min_length=1,
                                  description="separators for splitting long sections, tried in order")
    merge_heading_only: bool = Field(True, description="join a heading-only section to the next section")


@dataclass
class Heading:
    start: int  # offset of the heading line
    level: int
    title: str


def find_headings(text: str) -> list[Heading]:
    """ATX headings outside fenced code blocks, in order."""
    headings, fence, offset = [], None, 0
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        m = FENCE.match(body)
        if m:
            marker = m.group(1)
            if fence is None:
                fence = marker
            elif marker[0] == fence[0] and len(marker) >= len(fence) and not body.strip()[len(marker):].strip():
                fence = None
        elif fence is None:
            h = ATX_HEADING.match(body)
            if h:
                headings.append(Heading(offset, len(h.group(1)), (h.group(2) or "").strip()))
        offset += len(line)
    return headings


@dataclass
class Section:
    start: int
    end: int
    level: int
    title: str
    path: list[str]


def sections(document: Document, max_depth: int) -> list[Section]:
    text = document.text
    cuts = [h for h in find_headings(text) if h.level <= max_depth]
    out: list[Section] = []
    if not cuts or cuts[0].start > 0:
        out.append(Section(0, cuts[0].start if cuts else len(text), 0, document.title, []))
    stack: list[Heading] = []
    for i, h in enumerate(cuts):
        while stack and stack[-1].level >= h.level:
            stack.pop()
        end = cuts[i + 1].start if i + 1 < len(cuts) else len(text)
        out.append(Section(h.start, end, h.level, h.title, [s.title for s in stack]))
        stack.append(h)
    return out


def is_heading_only(text: str, section: Section) -> bool:
    return section.level > 0 and "\n" not in text[section.start:section.end].strip()


@CHUNKERS.register("markdown", MarkdownParams)
def markdown_chunks(document: Document, params: MarkdownParams) -> list[Chunk]:
    """Section-aware markdown: split at headings up to max_depth, keep sections whole, split long ones."""
    text = document.text
    splitter = RecursiveParams(chunk_size=params.chunk_size, chunk_overlap=min(params.chunk_overlap, params.chunk_size),
                               separators=params.separators)
    pieces = []
    pending_start: int | None = None  # start of heading-only sections waiting for their next section
    all_sections = sections(document, params.max_depth)
    for n, section in enumerate(all_sections):
        if params.merge_heading_only and is_heading_only(text, section) and n + 1 < len(all_sections):
            pending_start = section.start if pending_start is None else pending_start
            continue
        lo = section.start if pending_start is None else pending_start
        pending_start = None
        start, end = strip_span(text, lo, section.end)
        if end <= start:
            continue
        meta = {"title": section.title, "header_level": section.level,
                "parent_section": " > ".join(section.path), "heading_path": [*section.path, section.title]}
        spans = [(start, end)] if end - start <= params.chunk_size else recursive_spans(text, start, end, splitter)
        for part, (s, e) in enumerate(spans):
            pieces.append((s, e, text[s:e], {**meta, "section_part": part, "section_parts": len(spans)}))
    return make_chunks(document, pieces)
