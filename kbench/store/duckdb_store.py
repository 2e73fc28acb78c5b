"""The workspace's DuckDB database, shaped like production's archon_crawled_pages (see schema.sql).

One file per workspace (``<workspace>/stores/kbench.duckdb`` unless ``store.path`` says otherwise).
DuckDB lets one process write a file at a time, so the connection is held only while syncing and
reading vectors back; another run waiting for the lock retries for ``lock_timeout_s``.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np

from kbench.records import Chunk
from kbench.store.sync import (Collection, PageBatch, PageRows, ProductionStore, StoreDimensionError,
                               embedding_column, page_batch, page_groups, page_vectors)
from kbench.errors import UserError

SCHEMA_SQL = Path(__file__).with_name("schema.sql")
VECTOR_TABLES = ("archon_crawled_pages", "archon_code_examples")  # tables with per-dimension embedding columns


# DuckDB would fetch an extension from the internet to read a SQLite file or a remote path: never at run time.
NO_DOWNLOADS = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}

# Bounded write memory (see attach): rows per row group of the store file, and rows per INSERT in insert_pages
# (whole row groups, so each INSERT goes to the file rather than staying in memory until COMMIT).
STORE_ROW_GROUP_ROWS = 2048
INSERT_BATCH_ROWS = 4 * STORE_ROW_GROUP_ROWS


class StoreLockedError(UserError, RuntimeError):
    pass


class StoreFileError(UserError, ValueError):
    """store.path is not a DuckDB database kbench can use: not a database, damaged, or another schema."""


def connect_with_retry(path: Path, lock_timeout_s: float):
    import duckdb

    if path.is_dir():
        raise StoreFileError(f"{path} is a folder, not a DuckDB file; point store.path at a file")
    if path.is_file() and file_head(path) == b"SQLite format 3\0":
        raise StoreFileError(f"{path} is a SQLite database, not a DuckDB file; point store.path at another file")
    deadline = time.monotonic() + lock_timeout_s
    while True:
        try:
            return attach(path)
        except duckdb.IOException as e:
            held = "could not set lock" in str(e).lower()  # not "block": a corrupt file names a block
            if not held or time.monotonic() > deadline:
                if held:
                    raise StoreLockedError(
                        f"{path} is held by another process for more than {lock_timeout_s:.0f} s "
                        "(DuckDB allows one writer); wait for it, or give this run its own store.path"
                    ) from None
                raise StoreFileError(f"{path}: cannot open it as a DuckDB database ({first_line(e)}); move it "
                                     "away or point store.path at another file") from None
            time.sleep(0.5)
        except duckdb.Error as e:
            raise StoreFileError(f"{path}: cannot open it as a DuckDB database ({first_line(e)}); move it away "
                                 "or point store.path at another file") from None


def attach(path: Path):
    """A connection whose default database is the store file, attached with small row groups.

    Why: every row carries the five per-dimension columns of production's schema, and DuckDB keeps a NULL
    FLOAT[N] with its N child values until they are compressed, so an uncompressed row is ~27 KB at 384-d (6,784
    floats) against 1.5 KB of vector. Rows inserted inside a transaction are held uncompressed in memory until
    COMMIT unless one INSERT fills whole row groups, which DuckDB then writes to the file at once (rolled back
    with the transaction). The default row group (122,880 rows) is 3.3 GB of such rows; ``STORE_ROW_GROUP_ROWS``
    with insert_pages' ``INSERT_BATCH_ROWS`` keeps a sync's memory bounded whatever its size. Row group size is a
    storage detail: the rows, ids and values are the same, and any DuckDB reads the file.
    """
    import duckdb

    con = duckdb.connect(config=NO_DOWNLOADS)
    try:
        con.execute(f"ATTACH {sql_text(str(path))} AS kbench_store (ROW_GROUP_SIZE {STORE_ROW_GROUP_ROWS})")
        con.execute("USE kbench_store")
        con.execute("SET write_buffer_row_group_count = 1")  # flush each full row group, do not buffer five
        # where DuckDB spills when memory runs short: beside the store (its default for a file it opens), not
        # the working directory, which is where it would go for a database ATTACHed to an in-memory one
        con.execute(f"SET temp_directory = {sql_text(str(path) + '.tmp')}")
    except BaseException:
        con.close()
        raise
    return con


def sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def file_head(path: Path) -> bytes:
    with path.open("rb") as f:
        return f.read(16)


def first_line(error: Exception) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:300]


def expected_columns() -> dict[str, dict[str, str]]:
    """table -> column -> DuckDB type, as schema.sql creates them (read from an in-memory database)."""
    import duckdb

    with duckdb.connect() as con:
        con.execute(SCHEMA_SQL.read_text(encoding="utf-8"))
        return table_columns(con)


def table_columns(con) -> dict[str, dict[str, str]]:
    columns: dict[str, dict[str, str]] = {}
    for table, column, kind in con.execute("SELECT table_name, column_name, data_type FROM duckdb_columns() "
                                           "WHERE database_name = current_database()").fetchall():
        columns.setdefault(table, {})[column] = kind
    return columns


def check_schema(path: Path, found: dict[str, dict[str, str]]) -> None:
    """Refuse a database whose kbench tables differ from schema.sql: a column of another width is a
    ``StoreDimensionError`` (the vector would be cast or refused mid-write), anything else a ``StoreFileError``."""
    for table, want in expected_columns().items():
        if table not in found:
            continue  # created by schema.sql
        have = found[table]
        for column, kind in have.items():
            width = column.removeprefix("embedding_")
            if table == "archon_crawled_pages" and width.isdigit() and kind != f"FLOAT[{width}]":
                raise StoreDimensionError(
                    f"{path}: column archon_crawled_pages.{column} holds {kind}, not FLOAT[{width}]; this file "
                    "was written with another schema. Move it away or point store.path at another file")
        problems = [f"{column} is missing" for column in want if column not in have]
        problems += [f"{column} is {have[column]}, schema.sql says {kind}"
                     for column, kind in want.items() if column in have and have[column] != kind]
        if problems:
            raise StoreFileError(
                f"{path}: table {table} has another schema than kbench's ({'; '.join(problems[:3])}). "
                "Move the file away or point store.path at another file")


def check_complete(path: Path, con) -> None:
    """A file that ends before the last block its tables' segments use was cut short (a copy or a disk that
    stopped): refuse it before a query reads a block that is not there. Blocks lie after the file's headers,
    ``block_size`` bytes each, so the file holds at least (last block id + 1) of them."""
    import duckdb

    size = path.stat().st_size if path.is_file() else 0
    try:  # segment metadata only: milliseconds for hundreds of megabytes
        (block_size,) = con.execute("SELECT block_size FROM pragma_database_size() "
                                    "WHERE database_name = current_database()").fetchone()
        last = -1
        for (table,) in con.execute("SELECT table_name FROM duckdb_tables() "
                                    "WHERE database_name = current_database()").fetchall():
            (used,) = con.execute("SELECT max(greatest(block_id, coalesce(list_max(additional_block_ids), -1))) "
                                  f"FROM pragma_storage_info({sql_text(table)})").fetchone()
            last = max(last, -1 if used is None else int(used))
    except duckdb.IOException as e:  # the metadata itself lies past the end
        raise StoreFileError(f"{path}: truncated or damaged ({size:,} bytes; {first_line(e)}); move it away or "
                             "point store.path at another file") from None
    if size < (last + 1) * int(block_size):
        raise StoreFileError(f"{path}: truncated ({size:,} bytes; its tables use {last + 1} blocks of "
                             f"{int(block_size):,}); move it away or point store.path at another file")


def check_store_file(path: Path, lock_timeout_s: float = 120.0) -> None:
    """Open an existing store file and check its schema, before a run spends time embedding."""
    if path.exists():
        DuckStore(path, lock_timeout_s).close()


class DuckStore(ProductionStore):
    def __init__(self, path: Path | str, lock_timeout_s: float = 120.0, insert_batch_rows: int = INSERT_BATCH_ROWS):
        import duckdb

        self.path = Path(path)
        self.insert_batch_rows = insert_batch_rows
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.con = connect_with_retry(self.path, lock_timeout_s)
        try:
            check_complete(self.path, self.con)
            check_schema(self.path, table_columns(self.con))
            self.con.execute(SCHEMA_SQL.read_text(encoding="utf-8"))
        except duckdb.Error as e:
            self.con.close()
            raise StoreFileError(f"{self.path}: not a usable kbench store ({first_line(e)}); move it away or "
                                 "point store.path at another file") from None
        except BaseException:
            self.con.close()
            raise

    @classmethod
    @contextmanager
    def open(cls, path: Path | str, lock_timeout_s: float = 120.0,
             insert_batch_rows: int = INSERT_BATCH_ROWS) -> Iterator["DuckStore"]:
        import duckdb

        store = cls(path, lock_timeout_s, insert_batch_rows)
        try:
            yield store
        except (duckdb.IOException, duckdb.SerializationException) as e:
            if isinstance(e, duckdb.IOException) and "could not read" not in str(e).lower():
                raise  # a write that failed (a full disk) is the machine's, said as such by the CLI
            raise StoreFileError(f"{store.path}: damaged, DuckDB cannot read it ({first_line(e)}); move it away "
                                 "or point store.path at another file") from None
        finally:
            store.close()

    def close(self) -> None:
        self.con.close()

    @contextmanager
    def transaction(self):
        self.con.execute("BEGIN TRANSACTION")
        try:
            yield
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.con.execute("COMMIT")

    # ------------------------------------------------------------------ columns
    def vector_columns(self, table: str = "archon_crawled_pages") -> dict[str, int]:
        """embedding_N column -> N, for every per-dimension column the table has."""
        rows = self.con.execute(
            "SELECT column_name FROM duckdb_columns() WHERE table_name = ? "
            "AND column_name LIKE 'embedding\\_%' ESCAPE '\\' AND column_name <> 'embedding_dimension' "
            "AND column_name <> 'embedding_model'", [table]
        ).fetchall()
        return {name: int(name.split("_", 1)[1]) for (name,) in rows}

    def ensure_column(self, dimension: int, table: str = "archon_crawled_pages") -> str:
        """The column for ``dimension``, added (FLOAT[dimension]) when a model declares a new width."""
        if table not in VECTOR_TABLES:
            raise ValueError(f"no vector table {table!r}; kbench's are {', '.join(VECTOR_TABLES)}")
        column = embedding_column(dimension)
        if column not in self.vector_columns(table):
            self.con.execute(f"ALTER TABLE {table} ADD COLUMN {column} FLOAT[{int(dimension)}]")
        return column

    # ------------------------------------------------------------------ sync primitives
    def register_collection(self, collection: Collection) -> None:
        import json

        self.ensure_column(collection.embedding_dimension)
        found = self.con.execute("SELECT embedding_dimension, embedding_model FROM kbench_collections "
                                 "WHERE collection = ?", [collection.name]).fetchone()
        if found is None:
            self.con.execute(
                "INSERT INTO kbench_collections (collection, dataset, chunker, embedding_model, embedding_dimension, "
                "llm_chat_model, config) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [collection.name, collection.dataset, collection.chunker, collection.embedding_model,
                 collection.embedding_dimension, collection.llm_chat_model, json.dumps(collection.identity)])
        elif found[0] != collection.embedding_dimension:
            raise StoreDimensionError(
                f"collection {collection.name} holds {found[0]}-d vectors of {found[1]!r}; "
                f"model {collection.embedding_model!r} gives {collection.embedding_dimension}-d"
            )

    def existing_pages(self, collection: Collection) -> dict[str, str]:
        return dict(self.con.execute("SELECT page_id, state FROM kbench_page_state WHERE collection = ?",
                                     [collection.name]).fetchall())

    def delete_pages(self, collection: Collection, page_ids: list[str]) -> int:
        """Delete by source (page): its rows, its state and its failure records. Returns rows deleted."""
        args = [collection.name, page_ids]
        (n,) = self.con.execute("SELECT count(*) FROM archon_crawled_pages WHERE collection = ? "
                                "AND list_contains(?, page_id)", args).fetchone()
        for table in ("archon_crawled_pages", "kbench_page_state", "kbench_embedding_failures"):
            self.con.execute(f"DELETE FROM {table} WHERE collection = ? AND list_contains(?, page_id)", args)
        return int(n)

    def insert_pages(self, collection: Collection, pages: list[PageRows], chunks: list[Chunk],
                     vectors: np.ndarray, failures: dict[int, str], column: str | None = None) -> int:
        """Write ``pages``' rows, page state and failures, about ``insert_batch_rows`` rows per INSERT (see
        ``attach``); the caller's transaction (``sync``) makes them one write, so a failure leaves nothing. Every
        vector is checked before the first row is written."""
        groups = page_groups(pages, self.insert_batch_rows)
        for group in groups:
            page_vectors(collection, group, vectors, column)
        written = 0
        for group in groups:
            batch = page_batch(collection, group, chunks, vectors, failures, column)
            if batch.column not in self.vector_columns():
                self.ensure_column(collection.embedding_dimension)
            self._insert_rows(collection, batch)
            self._insert_arrow("kbench_page_state", ["page_id", "url", "source_id", "state", "chunk_count"],
                               collection, [[p.document.doc_id for p in group], [p.document.url for p in group],
                                            [p.document.source_id for p in group], [p.state for p in group],
                                            [len(p.chunk_indices) for p in group]])
            if batch.failed:
                self._insert_arrow("kbench_embedding_failures", ["page_id", "chunk_number", "content_hash", "reason"],
                                   collection, [list(values) for values in zip(*batch.failed)])
            written += len(batch.vectors)
        self._refresh_sources(collection)
        return written

    def _insert_rows(self, collection: Collection, batch: PageBatch) -> None:
        import pyarrow as pa

        dim = collection.embedding_dimension
        table = pa.table({
            **{k: pa.array(v) for k, v in batch.columns.items()},
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(batch.vectors.ravel(), pa.float32()), dim),
        })
        self.con.register("kbench_incoming", table)
        try:
            self.con.execute(
                f"INSERT INTO archon_crawled_pages (collection, url, chunk_number, content, metadata, {batch.column}, "
                "embedding_dimension, embedding_model, llm_chat_model, source_id, page_id, chunk_start, chunk_end, "
                "content_hash) SELECT ?, url, chunk_number, content, metadata::JSON, vec, ?, ?, ?, source_id, page_id, "
                "chunk_start, chunk_end, content_hash FROM kbench_incoming",
                [collection.name, dim, collection.embedding_model, collection.llm_chat_model])
        finally:
            self.con.unregister("kbench_incoming")

    def _insert_arrow(self, table_name: str, names: list[str], collection: Collection, values: list[list]) -> None:
        """INSERT the columns ``names`` (with the collection) from Python lists in one statement: executemany
        took ~2 ms a row."""
        import pyarrow as pa

        self.con.register("kbench_incoming_rows", pa.table(dict(zip(names, (pa.array(v) for v in values)))))
        try:
            self.con.execute(f"INSERT INTO {table_name} (collection, {', '.join(names)}) "
                             f"SELECT ?, {', '.join(names)} FROM kbench_incoming_rows", [collection.name])
        finally:
            self.con.unregister("kbench_incoming_rows")

    def _refresh_sources(self, collection: Collection) -> None:
        """archon_sources: one row per source_id with its word count, rebuilt from the pages."""
        self.con.execute("DELETE FROM archon_sources WHERE collection = ?", [collection.name])
        self.con.execute(
            "INSERT INTO archon_sources (collection, source_id, title, metadata, total_word_count) "
            "SELECT collection, source_id, source_id, '{}'::JSON, "
            "sum(len(string_split(trim(content), ' ')))::INTEGER FROM archon_crawled_pages "
            "WHERE collection = ? GROUP BY collection, source_id", [collection.name])

    def count_rows(self, collection: Collection) -> int:
        return int(self.con.execute("SELECT count(*) FROM archon_crawled_pages WHERE collection = ?",
                                    [collection.name]).fetchone()[0])

    def sync(self, collection, documents, chunks, vectors, failed):
        with self.transaction():
            return super().sync(collection, documents, chunks, vectors, failed)

    # ------------------------------------------------------------------ the code-example collection
    def write_code_examples(self, collection: str, rows: list[dict], vectors: np.ndarray, embedding_model: str,
                            llm_chat_model: str | None) -> int:
        """Replace ``collection``'s rows of archon_code_examples (one transaction): ``rows[i]`` (url, chunk_number,
        content, summary, language, metadata JSON text, source_id, page_id, code_start, code_end, content_hash)
        with vector ``vectors[i]``. Returns rows written."""
        import pyarrow as pa

        dim = int(vectors.shape[1])
        column = self.ensure_column(dim, "archon_code_examples")
        names = ("url", "chunk_number", "content", "summary", "language", "metadata", "source_id", "page_id",
                 "code_start", "code_end", "content_hash")
        table = pa.table({**{k: pa.array([r[k] for r in rows]) for k in names},
                          "vec": pa.FixedSizeListArray.from_arrays(
                              pa.array(np.asarray(vectors, np.float32).ravel(), pa.float32()), dim)})
        with self.transaction():
            self.con.execute("DELETE FROM archon_code_examples WHERE collection = ?", [collection])
            if rows:
                self.con.register("kbench_incoming_code", table)
                try:
                    self.con.execute(
                        f"INSERT INTO archon_code_examples (collection, {', '.join(names)}, {column}, "
                        "embedding_dimension, embedding_model, llm_chat_model) SELECT ?, "
                        f"{', '.join(n + '::JSON' if n == 'metadata' else n for n in names)}, vec, ?, ?, ? "
                        "FROM kbench_incoming_code", [collection, dim, embedding_model, llm_chat_model])
                finally:
                    self.con.unregister("kbench_incoming_code")
        return len(rows)

    def count_code_examples(self, collection: str) -> int:
        return int(self.con.execute("SELECT count(*) FROM archon_code_examples WHERE collection = ?",
                                    [collection]).fetchone()[0])

    # ------------------------------------------------------------------ reading back
    def read_vectors(self, collection: Collection, chunks: list[Chunk]) -> tuple[np.ndarray, np.ndarray]:
        """(chunk indices, vectors) of the collection's stored rows, mapped onto the run's chunk list.

        Read in record batches into one preallocated matrix: the vectors are held once, not as an Arrow table,
        its combined copy and a reordered copy (three times 1.5 GB at 1M x 384)."""
        column = embedding_column(collection.embedding_dimension)
        dim = collection.embedding_dimension
        where = f"FROM archon_crawled_pages WHERE collection = ? AND {column} IS NOT NULL"
        (n,) = self.con.execute(f"SELECT count(*) {where}", [collection.name]).fetchone()
        position = {(c.doc_id, c.chunk_number): i for i, c in enumerate(chunks)}
        ids = np.empty(n, dtype=np.int64)
        vectors = np.empty((n, dim), dtype=np.float32)
        reader = self.con.execute(f"SELECT page_id, chunk_number, {column} AS vec {where}",
                                  [collection.name]).to_arrow_reader(INSERT_BATCH_ROWS)
        at = 0
        for part in reader:
            rows = part.num_rows
            try:
                ids[at:at + rows] = [position[key] for key in zip(part.column("page_id").to_pylist(),
                                                                  part.column("chunk_number").to_pylist())]
            except KeyError as e:
                raise RuntimeError(f"store {collection.name} holds chunk {e.args[0]} that this run did not produce; "
                                   "sync before reading") from None
            vectors[at:at + rows] = part.column("vec").flatten().to_numpy().reshape(rows, dim)
            at += rows
        if at != n:
            raise RuntimeError(f"store {collection.name}: read {at} vectors, counted {n}")
        if n > 1 and not (ids[1:] > ids[:-1]).all():  # rows stored in another order than this run's chunks
            order = np.argsort(ids)
            return ids[order], vectors[order]
        return ids, vectors

    def vector_search(self, collection: Collection, query: np.ndarray, k: int) -> list[tuple[str, int, float]]:
        """Exact cosine top-k in SQL, column picked from the query's width: (page_id, chunk_number, similarity).

        A query of another width than the collection's model is an error, never an empty result.
        """
        query = np.asarray(query, dtype=np.float32).ravel()
        if query.shape[0] != collection.embedding_dimension:
            raise StoreDimensionError(
                f"query vector has {query.shape[0]} dimensions but collection {collection.name} stores "
                f"{collection.embedding_dimension}-d vectors of {collection.embedding_model!r} in "
                f"{embedding_column(collection.embedding_dimension)}"
            )
        column = embedding_column(collection.embedding_dimension)
        dim = collection.embedding_dimension
        return [(p, int(n), float(s)) for p, n, s in self.con.execute(
            f"SELECT page_id, chunk_number, array_cosine_similarity({column}, ?::FLOAT[{dim}]) AS similarity "
            f"FROM archon_crawled_pages WHERE collection = ? AND {column} IS NOT NULL "
            "ORDER BY similarity DESC, id LIMIT ?", [query.tolist(), collection.name, k]).fetchall()]

    def failures(self, collection: Collection) -> list[tuple[str, int, str]]:
        return self.con.execute("SELECT page_id, chunk_number, reason FROM kbench_embedding_failures "
                                "WHERE collection = ? ORDER BY page_id, chunk_number", [collection.name]).fetchall()
