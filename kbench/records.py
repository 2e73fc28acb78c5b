"""Plain records passed between stages.

Data flows one way: Dataset -> Chunk -> vectors -> Hit -> metrics. Every stage takes and returns these
dataclasses (or numpy arrays), so a stage can be tested, cached or swapped on its own.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Document:
    """One source document. ``text`` is what chunkers see and what span offsets index into."""

    doc_id: str
    text: str
    title: str = ""
    url: str = ""  # path or URL, as production stores it in archon_crawled_pages.url
    source_id: str = ""
    doc_type: str = "text"  # markdown | text | code | openapi | html | pdf | docx
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def content_hash(self) -> str:
        return sha256_text(self.text)


@dataclass(frozen=True)
class Chunk:
    """A piece of a document. ``document.text[start:end]`` covers the chunk's source text.

    ``text`` may differ from that slice (a smart chunk is stripped and merged with "\\n\\n"; an AST chunk
    may carry its class signature), but the range always covers where the text came from.
    """

    doc_id: str
    chunk_number: int
    start: int
    end: int
    text: str
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def chunk_id(self) -> str:
        return f"{self.doc_id}#{self.chunk_number}"


@dataclass(frozen=True)
class Query:
    query_id: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class Span:
    """A reference answer: characters ``[start, end)`` of document ``doc_id``."""

    doc_id: str
    start: int
    end: int


@dataclass
class Dataset:
    """A corpus with queries and judgements: document qrels (BEIR) and/or character spans."""

    name: str
    documents: list[Document]
    queries: list[Query]
    qrels: dict[str, dict[str, int]] = field(default_factory=dict)  # query_id -> doc_id -> grade
    spans: dict[str, list[Span]] = field(default_factory=dict)  # query_id -> reference spans
    skipped: dict[str, list[str]] = field(default_factory=dict)  # reason -> paths (loaders record why)

    @property
    def has_spans(self) -> bool:
        return bool(self.spans)


@dataclass
class Hit:
    """One ranked result for one query, with the evidence of how it got its rank."""

    chunk_index: int  # row in the run's chunk list
    score: float
    leg_scores: dict[str, float] = field(default_factory=dict)
    leg_ranks: dict[str, int] = field(default_factory=dict)  # 1-based rank in each leg that found it
    match_type: str = ""  # hybrid | vector | keyword | ... (which legs found it)
