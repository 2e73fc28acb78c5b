"""Plain records passed between stages.

Data flows one way: Dataset -> Chunk -> vectors -> Hit (inside retrieval) -> Run -> metrics. Every stage takes
and returns these dataclasses (or numpy arrays), so a stage can be tested, cached or swapped on its own.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kbench.hashing import sha256_text


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
    unit: str = ""  # "" for the run's chunking; a leg's own unit list otherwise (retrieval/units.py)

    @property
    def chunk_id(self) -> str:
        if self.unit:  # e.g. "doc7#document:0", "doc7#bm25:3": never the id of one of the run's chunks
            return f"{self.doc_id}#{self.unit}:{self.chunk_number}"
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
    content_hash: str | None = None  # set when the data is not a dataset folder's files (a live store's rows)
    # "documents" / "queries" -> how many there were before dataset.max_documents / max_queries took a sample
    sampled_from: dict[str, int] = field(default_factory=dict)

    @property
    def has_spans(self) -> bool:
        return bool(self.spans)


def chunks_by_doc(chunks: list[Chunk]) -> dict[str, list[int]]:
    """doc_id -> the rows of ``chunks`` that belong to it, in order."""
    by_doc: dict[str, list[int]] = {}
    for i, c in enumerate(chunks):
        by_doc.setdefault(c.doc_id, []).append(i)
    return by_doc


@dataclass
class Hit:
    """One ranked result inside the retrieval stage (legs, fusion, rerank, grouping work on chunk rows).

    Outside retrieval, rankings travel as a ``Run`` of ``RankedHit``s, which carry stable ids."""

    chunk_index: int  # row in the search's chunk list; Run.from_hits turns it into a stable chunk id
    score: float
    leg_scores: dict[str, float] = field(default_factory=dict)
    leg_ranks: dict[str, int] = field(default_factory=dict)  # 1-based rank in each leg that found it
    match_type: str = ""  # hybrid | vector | keyword | ... (which legs found it)
    passages: dict[str, int] = field(default_factory=dict)  # multi-unit runs: leg -> row of its best unit


@dataclass(frozen=True)
class Passage:
    """A leg's best unit in a document (multi-unit runs): its id and character range in the document."""

    unit_id: str
    start: int
    end: int


@dataclass(frozen=True)
class RankedHit:
    """One result of a Run: a chunk by its stable id, with its document, offsets and the evidence of its rank."""

    chunk_id: str
    doc_id: str
    score: float
    start: int = 0  # the chunk's character range in its document (span metrics read these)
    end: int = 0
    leg_scores: dict[str, float] = field(default_factory=dict, compare=False, hash=False)
    leg_ranks: dict[str, int] = field(default_factory=dict, compare=False, hash=False)  # 1-based, per leg
    match_type: str = ""
    passages: dict[str, Passage] = field(default_factory=dict, compare=False, hash=False)  # leg -> best unit


@dataclass
class Run:
    """Rankings of one search: per query id, the ranked hits, best first. The one record every consumer reads
    (evaluation, the run folder, TREC and ranx export, reranker training, comparisons).

    Views: ``doc_ids(qid)`` (each document at the rank of its best chunk), ``to_frame()`` (one row per hit),
    ``to_dict(level)`` (``{qid: {id: score}}``, scores strictly decreasing), ``to_ranx(level)``."""

    hits: dict[str, list[RankedHit]]
    name: str = "kbench"
    # per query, what each retrieval stage passed on before the final cut, as chunk ids best first:
    # "leg_<name>" (the leg's list at its depth), "fusion" (the fused candidates, before rerank), "rerank"
    # (before grouping). Miss attribution and the oracle ceilings read it; empty for runs read back from files.
    stages: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    TIE_STEP: ClassVar[float] = 1e-9
    FRAME_COLUMNS: ClassVar[tuple[str, ...]] = ("query_id", "rank", "chunk_id", "doc_id", "score")

    @classmethod
    def from_hits(cls, rankings: dict[str, list[Hit]], chunks: list[Chunk], name: str = "kbench",
                  stages: dict[str, dict[str, list[int]]] | None = None) -> "Run":
        """The retrieval stage's row-indexed hits -> stable ids (the chunk list need not travel further);
        ``stages``: per query, each stage's candidate rows (the retrieval stage's trace)."""
        out: dict[str, list[RankedHit]] = {}
        for qid, hits in rankings.items():
            ranked = []
            for h in hits:
                c = chunks[h.chunk_index]
                passages = {leg: Passage(chunks[row].chunk_id, chunks[row].start, chunks[row].end)
                            for leg, row in h.passages.items()}
                ranked.append(RankedHit(c.chunk_id, c.doc_id, float(h.score), c.start, c.end,
                                        dict(h.leg_scores), dict(h.leg_ranks), h.match_type, passages))
            out[qid] = ranked
        traced = {qid: {stage: [chunks[i].chunk_id for i in rows] for stage, rows in per_stage.items()}
                  for qid, per_stage in (stages or {}).items()}
        return cls(out, name, traced)

    @classmethod
    def from_frame(cls, frame, name: str = "kbench") -> "Run":
        """A ``to_frame()`` table (e.g. a run folder's rankings.parquet) back to a Run (no leg evidence)."""
        hits: dict[str, list[RankedHit]] = {}
        for qid, group in frame.sort_values(["query_id", "rank"]).groupby("query_id", sort=False):
            hits[str(qid)] = [RankedHit(str(c), str(d), float(s))
                              for c, d, s in zip(group["chunk_id"], group["doc_id"], group["score"])]
        return cls(hits, name)

    @property
    def query_ids(self) -> list[str]:
        return list(self.hits)

    def __getitem__(self, query_id: str) -> list[RankedHit]:
        return self.hits.get(query_id, [])

    def doc_ids(self, query_id: str) -> list[str]:
        """Document ranking of one query: each document at the rank of its best chunk."""
        seen, docs = set(), []
        for h in self.hits.get(query_id, []):
            if h.doc_id not in seen:
                seen.add(h.doc_id)
                docs.append(h.doc_id)
        return docs

    def to_frame(self):
        """One row per hit: query_id, rank (1-based), chunk_id, doc_id, score."""
        import pandas as pd

        rows = [(qid, rank, h.chunk_id, h.doc_id, h.score)
                for qid, hits in self.hits.items() for rank, h in enumerate(hits, start=1)]
        return pd.DataFrame(rows, columns=list(self.FRAME_COLUMNS))

    def to_dict(self, level: str = "doc") -> dict[str, dict[str, float]]:
        """``{query_id: {id: score}}`` in kbench's order with scores made strictly decreasing.

        Tools such as trec_eval and ranx order a query's items by score, not rank: an item whose score ties
        the one above it is given a hair (1e-9, relative) less. ``doc``: each document at the rank and score
        of its best chunk; ``chunk``: chunk ids."""
        if level not in ("doc", "chunk"):
            raise ValueError(f"level: {level!r}; allowed: doc, chunk")
        out: dict[str, dict[str, float]] = {}
        for qid, hits in self.hits.items():
            items: dict[str, float] = {}
            for h in hits:
                key = h.doc_id if level == "doc" else h.chunk_id
                if key not in items:
                    items[key] = h.score
            out[qid] = strictly_decreasing(list(items.items()), self.TIE_STEP)
        return out

    def to_ranx(self, level: str = "doc"):
        from ranx import Run as RanxRun

        return RanxRun(self.to_dict(level), name=self.name)


def strictly_decreasing(items: list[tuple[str, float]], step: float = 1e-9) -> dict[str, float]:
    """Scores in the given order, each lowered just below the one above when it would tie or exceed it."""
    out: dict[str, float] = {}
    previous = math.inf
    for item_id, score in items:
        score = float(score) if score == score else -math.inf
        if score >= previous:
            score = previous - step * max(1.0, abs(previous))
        out[item_id] = score
        previous = score
    return out
