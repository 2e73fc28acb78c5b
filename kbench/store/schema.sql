-- kbench's DuckDB mirror of Archon's schema (archon_sources, archon_crawled_pages, archon_code_examples).
-- Differences from production, each for a reason:
--   * `collection` scopes rows to one chunking + embedding of one corpus (a workspace holds many runs);
--   * ids are BIGINT from a sequence (DuckDB has no UUID default that is stable for FAISS ids);
--   * embedding_384 is added beside 768/1024/1536/3072 (MiniLM); other widths are added on demand;
--   * chunk_start/chunk_end/content_hash record where a chunk came from and what it contained;
--   * no tsvector column: the keyword legs (bm25, postgres_fts) index the chunks in Python.
CREATE SEQUENCE IF NOT EXISTS archon_crawled_pages_id_seq START 1;

CREATE TABLE IF NOT EXISTS kbench_collections (
    collection TEXT PRIMARY KEY,
    dataset TEXT,
    chunker TEXT,
    embedding_model TEXT,
    embedding_dimension INTEGER,
    llm_chat_model TEXT,
    config JSON,
    created_at TIMESTAMP DEFAULT current_timestamp
);

CREATE TABLE IF NOT EXISTS archon_sources (
    collection TEXT NOT NULL,
    source_id TEXT NOT NULL,
    title TEXT,
    summary TEXT,
    metadata JSON,
    total_word_count INTEGER,
    created_at TIMESTAMP DEFAULT current_timestamp,
    updated_at TIMESTAMP DEFAULT current_timestamp
);

CREATE TABLE IF NOT EXISTS archon_crawled_pages (
    id BIGINT DEFAULT nextval('archon_crawled_pages_id_seq'),
    collection TEXT NOT NULL,
    url TEXT NOT NULL,
    chunk_number INTEGER NOT NULL,
    content TEXT NOT NULL,
    metadata JSON,
    embedding_384 FLOAT[384],
    embedding_768 FLOAT[768],
    embedding_1024 FLOAT[1024],
    embedding_1536 FLOAT[1536],
    embedding_3072 FLOAT[3072],
    embedding_dimension INTEGER NOT NULL,
    embedding_model TEXT NOT NULL,
    llm_chat_model TEXT,
    source_id TEXT,
    page_id TEXT NOT NULL,
    chunk_start INTEGER,
    chunk_end INTEGER,
    content_hash TEXT NOT NULL,
    created_at TIMESTAMP DEFAULT current_timestamp,
    updated_at TIMESTAMP DEFAULT current_timestamp
);

-- One row per page (document): its state hash decides skip vs rewrite on the next sync.
CREATE TABLE IF NOT EXISTS kbench_page_state (
    collection TEXT NOT NULL,
    page_id TEXT NOT NULL,
    url TEXT,
    source_id TEXT,
    state TEXT NOT NULL,
    chunk_count INTEGER,
    updated_at TIMESTAMP DEFAULT current_timestamp
);

-- Chunks whose embedding failed: recorded, never stored as a zero or NULL vector.
CREATE TABLE IF NOT EXISTS kbench_embedding_failures (
    collection TEXT NOT NULL,
    page_id TEXT NOT NULL,
    chunk_number INTEGER,
    content_hash TEXT,
    reason TEXT,
    created_at TIMESTAMP DEFAULT current_timestamp
);

-- Archon's and the Archon replication guide's second collection ("agentic RAG"): one row per fenced code block of a page, with its
-- LLM summary and the vector of code + summary (kbench/enrichment/code_examples.py). As for the pages, kbench
-- adds `collection`, `page_id` and where the block sits in its page (code_start/code_end: the code between the
-- fences, so page text[code_start:code_end] = content). A block whose embedding failed gets no row.
CREATE SEQUENCE IF NOT EXISTS archon_code_examples_id_seq START 1;

CREATE TABLE IF NOT EXISTS archon_code_examples (
    id BIGINT DEFAULT nextval('archon_code_examples_id_seq'),
    collection TEXT NOT NULL,
    url TEXT NOT NULL,
    chunk_number INTEGER NOT NULL,
    content TEXT NOT NULL,
    summary TEXT,
    language TEXT,
    metadata JSON,
    embedding_384 FLOAT[384],
    embedding_768 FLOAT[768],
    embedding_1024 FLOAT[1024],
    embedding_1536 FLOAT[1536],
    embedding_3072 FLOAT[3072],
    embedding_dimension INTEGER NOT NULL,
    embedding_model TEXT NOT NULL,
    llm_chat_model TEXT,
    source_id TEXT,
    page_id TEXT NOT NULL,
    code_start INTEGER NOT NULL,
    code_end INTEGER NOT NULL,
    content_hash TEXT NOT NULL,
    created_at TIMESTAMP DEFAULT current_timestamp
);
