"""``postgres_fts``: the keyword search the production systems run in PostgreSQL, emulated in Python.

Archon's and the Archon replication guide's text leg is, per query::

    SELECT id, ts_rank_cd(content_search_vector, plainto_tsquery('english', q)) AS rank
    FROM pages WHERE content_search_vector @@ plainto_tsquery('english', q)   -- vector = to_tsvector('english', content)
    ORDER BY rank DESC LIMIT n

and Supabase ranks with ``ts_rank`` instead. This leg computes the same tsvectors, the same tsquery, the
same ``@@`` match and the same scores as PostgreSQL 18 (see :mod:`kbench.retrieval.text.pg_tsearch`; a
parity test checks them against a real server). A quirk it keeps on purpose: plainto_tsquery ANDs every
query word, so a long natural-language question matches only documents containing *all* its words — on
SciFact most test claims match nothing and the leg returns an empty list for them.

Knobs: the configuration (``english``, ``french``, ``german``, ``portuguese``, ``russian``, ``spanish``: that
language's Snowball stemmer and stop list as PostgreSQL builds them; or ``simple``: no stemming, no stop words;
the Supabase function's ``query_lang``), its stop words (``stopwords``: the configuration's own by default, or
a list name or a file, as a custom dictionary would give), the
query parser (``plainto`` as production; ``or``: the same lexemes ORed, to measure what the AND costs;
``websearch_or``: ``websearch_to_tsquery(config, 'w1 or w2 or ...')`` over the question's words, the OR query
application code commonly builds, kbench/retrieval/text/pg_websearch.py), the rank function and PostgreSQL's
normalization bitmask. Ties in rank (PostgreSQL returns them in scan order) go to the lower chunk index.
"""
from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, field_validator

from kbench.records import Query
from kbench.registry import StrictModel
from kbench.retrieval.contracts import Leg, LegResult, SearchContext
from kbench.retrieval.legs.bm25 import top_k_pairs
from kbench.retrieval.registry import LEGS
from kbench.retrieval.text.pg_or_index import OrRankIndex
from kbench.retrieval.text.pg_tsearch import RANK_FUNCTIONS, TextSearchConfig, TsQuery, matches
from kbench.retrieval.text.pg_websearch import websearch_or_text, websearch_to_tsquery
from kbench.retrieval.text.stopwords import resolve_list_path


class PostgresFtsParams(StrictModel):
    late_knobs = {"stopwords": None}  # added later: unset, configs keep the run keys they had
    config: Literal["english", "simple", "french", "german", "portuguese", "russian", "spanish"] = Field(
        "english", description="text search configuration of to_tsvector and the query, as PostgreSQL names it (the "
        "Supabase function's query_lang, 'simple' by default): simple (lowercase only), or a language: its Snowball "
        "stemmer and stop list as PostgreSQL 18 builds them (russian stems ASCII words as english)")
    stopwords: str | None = Field(
        None, description="the word dictionary's stop list: null = the configuration's own (english: english.stop, "
                          "127 words; french: french.stop...; simple: none) | none | english | lucene (33 words) | "
                          "french | german | portuguese | russian | spanish | a file, one word per line")
    query_parser: Literal["plainto", "or", "websearch_or"] = Field(
        "plainto", description="plainto: plainto_tsquery, every lexeme ANDed (production); or: the same lexemes ORed; "
                               "websearch_or: websearch_to_tsquery(config, 'w1 or w2 or ...') over the question's words")
    rank_function: Literal["ts_rank_cd", "ts_rank"] = Field(
        "ts_rank_cd", description="ts_rank_cd: cover density (Archon and the Archon replication guide); ts_rank: frequency/proximity (Supabase)")
    normalization: int = Field(
        0, ge=0, le=63, description="PostgreSQL's normalization bitmask: 1 log length, 2 length, 4 cover distance "
        "(ts_rank_cd), 8 unique words, 16 log unique words, 32 rank/(rank+1); 0 = none (production)")

    @field_validator("stopwords")
    @classmethod
    def _known_list_or_file(cls, value: str | None) -> str | None:
        return None if value is None else resolve_list_path(value)


@LEGS.register("postgres_fts", PostgresFtsParams)
class PostgresFtsLeg(Leg):
    """PostgreSQL full-text search: to_tsvector @@ plainto_tsquery, ranked by ts_rank_cd (or ts_rank)."""

    needs_query_vectors = False
    scores_any_unit = True

    @staticmethod
    def preflight(params: PostgresFtsParams) -> None:
        TextSearchConfig(params.config, params.stopwords)  # its stemmers' package (snowballstemmer), or one line

    def __init__(self, context: SearchContext, params: PostgresFtsParams):
        self.params = params
        self.config = TextSearchConfig(params.config, params.stopwords)
        self.rank = RANK_FUNCTIONS[params.rank_function]
        self.vectors = [self.config.to_tsvector(chunk.text) for chunk in context.chunks]
        postings: dict[str, list[int]] = {}
        for i, vector in enumerate(self.vectors):
            for lexeme in vector:
                postings.setdefault(lexeme, []).append(i)
        self.postings = {lexeme: np.array(ids, dtype=np.int64) for lexeme, ids in postings.items()}
        # ORed queries match most documents: rank them all at once through postings with position counts
        self.or_index = OrRankIndex(self.vectors) if params.query_parser != "plainto" else None

    def tsquery(self, text: str) -> TsQuery:
        if self.params.query_parser == "plainto":
            return self.config.plainto_tsquery(text)
        if self.params.query_parser == "websearch_or":
            return websearch_to_tsquery(self.config, websearch_or_text(text))
        return self.config.or_tsquery(text)

    def candidates(self, query: TsQuery) -> np.ndarray:
        """Chunks whose tsvector matches ``query`` (``@@``), by intersecting or joining posting lists."""
        lists = [self.postings.get(lexeme) for lexeme in dict.fromkeys(query.operands)]
        empty = np.zeros(0, dtype=np.int64)
        if query.matches_without_operands:  # a NOT: chunks holding no query lexeme may match
            return np.array([i for i, vector in enumerate(self.vectors) if matches(vector, query)], dtype=np.int64)
        if query.kind == "and":
            if any(ids is None for ids in lists):
                return empty
            found = lists[0]
            for ids in sorted(lists[1:], key=len):
                found = np.intersect1d(found, ids, assume_unique=True)
            return found
        found = np.unique(np.concatenate([ids for ids in lists if ids is not None] or [empty]))
        if query.kind == "mixed":
            found = np.array([i for i in found if matches(self.vectors[i], query)], dtype=np.int64)
        return found

    def search(self, queries: list[Query], query_vectors: np.ndarray | None, k: int,
               mask: np.ndarray | None = None) -> list[LegResult]:
        results = []
        for query in queries:
            tsquery = self.tsquery(query.text)
            if self.or_index is not None and OrRankIndex.handles(tsquery, self.params.rank_function,
                                                                 self.params.normalization):
                ids, scores = self.or_index.search(tsquery, self.params.rank_function, self.params.normalization, mask)
                results.append(top_k_pairs(ids, scores, k))
                continue
            ids = self.candidates(tsquery) if tsquery.root is not None else np.zeros(0, dtype=np.int64)
            if mask is not None:
                ids = ids[mask[ids]]
            scores = np.array([self.rank(self.vectors[i], tsquery, normalization=self.params.normalization)
                               for i in ids], dtype=np.float64)
            results.append(top_k_pairs(ids, scores, k))
        return results

    def score(self, queries: list[Query], query_vectors: np.ndarray | None,
              rows: list[np.ndarray]) -> list[np.ndarray]:
        """The rank function of each unit in ``rows``, matching or not (``SELECT ts_rank_cd(tsv, q)`` without
        the ``WHERE tsv @@ q``)."""
        out = []
        for query, units in zip(queries, rows):
            tsquery = self.tsquery(query.text)
            out.append(np.array([self.rank(self.vectors[i], tsquery, normalization=self.params.normalization)
                                 for i in units], dtype=np.float64))
        return out
