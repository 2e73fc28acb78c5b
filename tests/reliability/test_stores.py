"""A DuckDB store file kbench cannot use fails before any work, naming the file and what is wrong.

Each case plants a real file at ``store.path`` (random bytes, a damaged DuckDB database, a SQLite file, tables
of another schema or another column width) and runs the real ``kbench run``: exit 2, one line naming the
file, nothing written to the workspace, and the file left byte for byte as it was.
"""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import duckdb
import pytest

from kbench.store.duckdb_store import SCHEMA_SQL, DuckStore, StoreFileError
from kbench.store.sync import StoreDimensionError
from tests.reliability.inputs import DEMO, assert_nothing_written, config, error_lines, run_kbench, write_yaml


def duckdb_file(path: Path, *statements: str) -> None:
    with duckdb.connect(str(path)) as con:
        for sql in statements:
            con.execute(sql)


def damaged_store(path: Path) -> None:
    """A real kbench store with rows, then 40 kB of its blocks overwritten (a torn disk write)."""
    rows = ", ".join(f"('c', 'u{i}', {i}, '{'x' * 200}', 384, 'm', 'p{i}', 'h{i}')" for i in range(3000))
    duckdb_file(path, SCHEMA_SQL.read_text(encoding="utf-8"),
                "INSERT INTO archon_crawled_pages (collection, url, chunk_number, content, embedding_dimension, "
                f"embedding_model, page_id, content_hash) VALUES {rows}")
    data = bytearray(path.read_bytes())
    data[20000:60000] = os.urandom(40000)
    path.write_bytes(bytes(data))


def truncated_store(path: Path, cut: int = 20000) -> None:
    """A real kbench store with rows, ``cut`` bytes short (a copy or a disk that stopped)."""
    rows = ", ".join(f"('c', 'u{i}', {i}, '{'x' * 200}', 384, 'm', 'p{i}', 'h{i}')" for i in range(3000))
    duckdb_file(path, SCHEMA_SQL.read_text(encoding="utf-8"),
                "INSERT INTO archon_crawled_pages (collection, url, chunk_number, content, embedding_dimension, "
                f"embedding_model, page_id, content_hash) VALUES {rows}")
    os.truncate(path, path.stat().st_size - cut)


def sqlite_file(path: Path) -> None:
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE archon_crawled_pages (id INTEGER)")


STORE_FILES = {
    "random_bytes": (lambda p: p.write_bytes(os.urandom(8192)), "not a valid DuckDB database"),
    "empty_file": (lambda p: p.write_bytes(b""), "not a valid DuckDB database"),
    "text_file": (lambda p: p.write_text("collection,url\nc,u\n"), "not a valid DuckDB database"),
    "sqlite_file": (sqlite_file, "is a SQLite database, not a DuckDB file"),
    "damaged_blocks": (damaged_store, "Corrupt database file"),
    "truncated": (truncated_store, "truncated or damaged (516,576 bytes; IO Error: Could not read enough bytes"),
    "a_folder": (lambda p: p.mkdir(), "is a folder, not a DuckDB file"),
    "vector_column_of_another_width": (
        lambda p: duckdb_file(p, "CREATE TABLE archon_crawled_pages (id BIGINT, embedding_384 FLOAT[768])"),
        "archon_crawled_pages.embedding_384 holds FLOAT[768], not FLOAT[384]"),
    "vector_column_as_text": (
        lambda p: duckdb_file(p, "CREATE TABLE archon_crawled_pages (id BIGINT, embedding_768 TEXT)"),
        "archon_crawled_pages.embedding_768 holds VARCHAR, not FLOAT[768]"),
    "pages_table_of_another_schema": (
        lambda p: duckdb_file(p, "CREATE TABLE archon_crawled_pages (id BIGINT, url TEXT, body TEXT)"),
        "table archon_crawled_pages has another schema than kbench's (collection is missing"),
    "collections_table_of_another_type": (
        lambda p: duckdb_file(p, SCHEMA_SQL.read_text(encoding="utf-8"), "DROP TABLE kbench_collections",
                              "CREATE TABLE kbench_collections (collection INTEGER, dataset TEXT)"),
        "table kbench_collections has another schema than kbench's (chunker is missing"),
}


def snapshot(path: Path) -> bytes | list[str]:
    return sorted(os.listdir(path)) if path.is_dir() else path.read_bytes()


@pytest.mark.parametrize("case", sorted(STORE_FILES))
def test_cli_a_store_file_kbench_cannot_use_exits_2_before_any_work(tmp_path, case):
    plant, message = STORE_FILES[case]
    store = tmp_path / "store.duckdb"
    plant(store)
    before = snapshot(store)
    workspace = tmp_path / "ws"
    cfg = config(workspace, {"path": str(DEMO)}, store={"backend": "duckdb", "path": str(store)},
                 retrieval={"legs": ["vector"], "top_k": 10})
    done = run_kbench("run", str(write_yaml(tmp_path / "c.yaml", cfg)), "--quiet", cwd=tmp_path, timeout=120)
    assert done.code == 2, done.err[-2000:]
    (line,) = error_lines(done.err)
    assert str(store) in line and message in line, line
    assert "Traceback" not in done.err
    assert_nothing_written(workspace)
    assert snapshot(store) == before


def test_a_good_store_with_extra_widths_and_tables_opens(tmp_path):
    """The check refuses only what kbench cannot use: another app's table and a new width are fine."""
    path = tmp_path / "store.duckdb"
    duckdb_file(path, SCHEMA_SQL.read_text(encoding="utf-8"), "CREATE TABLE notes (x INTEGER)",
                "ALTER TABLE archon_crawled_pages ADD COLUMN embedding_256 FLOAT[256]")
    with DuckStore.open(path) as store:
        assert store.vector_columns()[f"embedding_{256}"] == 256


def test_the_api_raises_the_named_errors(tmp_path):
    wide = tmp_path / "wide.duckdb"
    duckdb_file(wide, "CREATE TABLE archon_crawled_pages (id BIGINT, embedding_1024 FLOAT[3])")
    with pytest.raises(StoreDimensionError, match="embedding_1024 holds FLOAT"):
        DuckStore(wide)
    junk = tmp_path / "junk.duckdb"
    junk.write_bytes(b"\0" * 5000)
    with pytest.raises(StoreFileError, match="junk.duckdb: cannot open it as a DuckDB database"):
        DuckStore(junk)


def store_with_data_blocks(path: Path) -> int:
    """A DuckDB file of 15 data blocks whose metadata is written last, at its end; its size."""
    duckdb_file(path, "CREATE TABLE notes AS SELECT i, md5(i::VARCHAR) || md5((i * 7)::VARCHAR) AS text "
                      "FROM range(100000) r(i)", "CHECKPOINT", "CREATE TABLE tail AS SELECT 1 AS i")
    return path.stat().st_size


def test_a_store_whose_data_blocks_are_cut_off_is_refused_on_opening(tmp_path):
    """Its metadata readable, its data blocks past the end: refused before any query (a traceback from the first
    query that read them, after the run had chunked and embedded)."""
    store = tmp_path / "store.duckdb"
    os.truncate(store, store_with_data_blocks(store) - 300_000)
    with pytest.raises(StoreFileError, match=f"{store}: truncated .* its tables use 15 blocks"):
        DuckStore(store)


def test_a_block_duckdb_cannot_read_later_is_a_store_file_error(tmp_path):
    """Cut inside its last block: it opens, and the read that fails is one line, not an IOException traceback."""
    store = tmp_path / "store.duckdb"
    os.truncate(store, store_with_data_blocks(store) - 5000)
    with pytest.raises(StoreFileError, match=f"{store}: damaged, DuckDB cannot read it .*; move it away"):
        with DuckStore.open(store) as opened:
            opened.con.execute("SELECT count(*), max(text) FROM notes").fetchone()
