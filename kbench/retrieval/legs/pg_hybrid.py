"""``pg_hybrid``: one of the production hybrid SQL functions, run inside PostgreSQL (store.backend: pgvector).

The function does vector search, full-text search and their fusion in one SQL call, exactly as the
reference defines it (kbench/store/pg_schema.sql), so this leg is used alone with fusion ``none``:

- ``archon_weighted``: Archon's hybrid_search_archon_crawled_pages (0.7 * cosine + 0.3 * ts_rank_cd);
- ``archon_hybrid``: the Archon replication guide's hybrid_search_documents (FULL OUTER JOIN, COALESCE score);
- ``rrf_supabase``: Supabase's hybrid_knowledge_chunks_search_v2 (RRF over raw scores, inner join).

The Python fusions of the same names over the ``vector`` and ``postgres_fts`` legs are what the parity
benchmark compares these against.
"""
from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, field_validator

from kbench.records import Query
from kbench.registry import StrictModel
from kbench.retrieval.contracts import Leg, LegResult, SearchContext
from kbench.retrieval.registry import LEGS
from kbench.retrieval.text.pg_tsearch import POSTGRES_CONFIG_NAMES


class PgHybridParams(StrictModel):
    function: Literal["archon_weighted", "archon_hybrid", "rrf_supabase"] = Field(
        "archon_hybrid", description="the production SQL function called (archon_weighted: Archon; archon_hybrid: "
        "the Archon replication guide; rrf_supabase: Supabase)")
    similarity_threshold: float = Field(0.05, description="archon_weighted: vector hits need cosine > this")
    rrf_k: int = Field(10, ge=0, description="rrf_supabase: the k in 1/(k + value)")
    query_lang: str = Field("english", description="rrf_supabase: text search configuration, one PostgreSQL ships "
                            "(simple, english, french, german, spanish, ...; Supabase's default: simple)")

    @field_validator("query_lang")
    @classmethod
    def _postgres_config(cls, value: str) -> str:
        if value not in POSTGRES_CONFIG_NAMES:  # PostgreSQL would fail each query with 'does not exist'
            raise ValueError(f"query_lang {value!r} is not a text search configuration PostgreSQL ships; give one "
                             f"of {', '.join(POSTGRES_CONFIG_NAMES)}")
        return value


@LEGS.register("pg_hybrid", PgHybridParams)
class PgHybridLeg(Leg):
    """A production hybrid SQL function in PostgreSQL (needs store.backend: pgvector)."""

    needs_query_vectors = True

    def __init__(self, context: SearchContext, params: PgHybridParams):
        self.store = context.store.pg_store if context.store is not None else None
        if self.store is None:
            raise ValueError("retrieval.legs: 'pg_hybrid' runs a production SQL function inside PostgreSQL; "
                             "set store.backend: pgvector (or use the vector + postgres_fts legs with a fusion)")
        self.params = params

    def search(self, queries: list[Query], query_vectors: np.ndarray, k: int,
               mask: np.ndarray | None = None) -> list[LegResult]:
        p = self.params
        results = []
        for query, vector in zip(queries, query_vectors):
            rows = self.store.hybrid(p.function, vector, query.text, k, similarity_threshold=p.similarity_threshold,
                                     rrf_k=p.rrf_k, query_lang=p.query_lang)
            results.append([(i, s) for i, s, _ in rows if mask is None or mask[i]])
        return results
