"""A production PostgreSQL as it is, read-only: Archon's archon_crawled_pages with its stored vectors.

``LiveStore`` connects with a DSN read from the environment (``store.dsn_env``; the DSN is a secret and never
printed or logged), runs everything in one READ ONLY, REPEATABLE READ transaction (one snapshot for the rows
and every search) and refuses to start when the role could write, unless ``store.allow_write``. Searches go
through production's own SQL functions (``match_archon_crawled_pages`` and the hybrids), inherited from
``PgVectorStore``; only the connection and the rows differ.

Rows become the run's chunks as production stored them. Documents are rebuilt per page (one per URL): each
chunk placed at its stored offsets when the rows carry chunk_start/chunk_end (rows kbench wrote), else the
chunks joined by a blank line in chunk_number order. ``build_live_dataset`` maps a question set whose
references name documents by URL or source id onto those documents; a reference without offsets (or any
reference when the rows carry none) is located by its text.

What production would get wrong is reported, not hidden: a model whose width has no column, and a search
function that reads another width's column than the rows fill (Archon's functions read embedding_1536 only,
so 768- and 1024-d models get empty results).
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kbench.datasets.reading import DatasetError, dataset_file, get_id, get_text, iter_jsonl
from kbench.datasets.spans import doc_qrels_from_spans
from kbench.errors import ConfigError, shorten
from kbench.hashing import folder_content_hash, stable_hash
from kbench.records import Chunk, Dataset, Document, Query, Span
from kbench.store.pgvector_store import HYBRID_FUNCTIONS, PgVectorStore
from kbench.store.sync import Collection, embedding_column

PAGES_TABLE = "archon_crawled_pages"
MATCH_FUNCTION = "match_archon_crawled_pages"
VECTOR_COLUMN = re.compile(r"embedding_\d+")
REQUIRED_COLUMNS = ("id", "url", "source_id", "chunk_number", "content", "embedding_model", "embedding_dimension")
JOINER = "\n\n"  # between chunks of a page rebuilt from rows without offsets


class LiveStoreError(ConfigError):
    """A live store kbench will not evaluate as configured (exit code 2): a writable role, a missing table or
    column, rows of several models, a search function that reads another width's column."""


@dataclass
class LiveRows:
    """The rows of archon_crawled_pages that have a vector in their model's column, in (url, chunk_number) order."""

    row_ids: list[str]
    urls: list[str]
    source_ids: list[str]
    chunk_numbers: list[int]
    contents: list[str]
    starts: list[int | None]
    ends: list[int | None]
    vectors: np.ndarray
    model: str
    dimension: int
    rows_without_vector: int = 0

    @property
    def has_offsets(self) -> bool:
        return all(s is not None for s in self.starts) and all(e is not None for e in self.ends)

    def content_hash(self) -> str:
        return stable_hash([self.row_ids, self.urls, self.contents, self.starts, self.ends, self.model,
                            stable_hash(self.vectors.tobytes().hex())])


def dsn_from_env(name: str) -> str:
    dsn = os.environ.get(name)
    if not dsn:
        raise LiveStoreError(f"store.dsn_env: the environment variable {name} is not set; export the production "
                             "DSN there (it is a secret: kbench never writes it to a config, log or MLflow)")
    return dsn


class LiveStore(PgVectorStore):
    def __init__(self, dsn: str, schema: str | None = None, allow_write: bool = False,
                 dsn_from: str = "store.dsn_env", schema_from: str = "store.live_schema"):
        """``dsn_from`` and ``schema_from`` name where the DSN and the schema came from, for messages."""
        import psycopg
        from psycopg import sql
        from psycopg.conninfo import conninfo_to_dict

        self.server = None
        self._ids: dict[str, int] = {}
        self.function_problems: dict[str, str] = {}
        try:
            conninfo_to_dict(dsn)
        except Exception:  # noqa: BLE001 - psycopg's message quotes the DSN (a secret), however long
            raise LiveStoreError(f"{dsn_from}: the DSN is not a PostgreSQL connection string; write it as "
                                 "postgresql://user@host:port/database (the password in PGPASSWORD)") from None
        try:
            self.conn = psycopg.connect(dsn)
        except psycopg.Error as e:  # the message may quote the DSN: name the class only
            raise LiveStoreError(f"cannot connect to the live store from {dsn_from} ({type(e).__name__}); "
                                 "check the DSN, the network and the role") from None
        self.conn.read_only = True  # every statement below runs in one READ ONLY transaction
        self.conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ  # one snapshot for rows and searches
        try:
            with self.conn.cursor() as cur:
                if schema:
                    self._check_schema_exists(schema, schema_from)
                    cur.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))
                self.schema = cur.execute("SELECT current_schema()").fetchone()[0]
            if schema and self.schema != schema:  # a search path falls back silently: never evaluate another schema
                raise LiveStoreError(f"{schema_from}: the search path did not reach schema {schema!r} (it gives "
                                     f"{self.schema!r}); grant USAGE on it to this role")
            self._check_table()
            self._check_role(allow_write)
        except BaseException:
            self.conn.close()
            raise

    def close(self) -> None:
        self.conn.rollback()  # nothing was written; end the snapshot
        self.conn.close()

    def _columns(self) -> set[str]:
        with self.conn.cursor() as cur:
            return {r[0] for r in cur.execute("SELECT column_name FROM information_schema.columns WHERE "
                                              "table_schema = %s AND table_name = %s", [self.schema, PAGES_TABLE])}

    def _check_schema_exists(self, schema: str, schema_from: str) -> None:
        """A schema name that matches nothing is a typo, never a reason to read ``public`` instead."""
        with self.conn.cursor() as cur:
            if cur.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", [schema]).fetchone():
                return
            holders = [r[0] for r in cur.execute(
                "SELECT table_schema FROM information_schema.tables WHERE table_name = %s ORDER BY 1 LIMIT 6",
                [PAGES_TABLE]).fetchall()]
        found = f"schemas with {PAGES_TABLE}: {', '.join(holders)}" if holders else f"no schema holds {PAGES_TABLE}"
        raise LiveStoreError(f"{schema_from}: this database has no schema {shorten(schema, 70)} ({found}); fix "
                             "the name")

    def _check_table(self) -> None:
        columns = self._columns()
        if not columns:
            raise LiveStoreError(f"schema {self.schema} has no table {PAGES_TABLE} (Archon's schema); give "
                                 "store.live_schema, or a DSN whose search_path finds it")
        missing = [c for c in REQUIRED_COLUMNS if c not in columns]
        if not any(VECTOR_COLUMN.fullmatch(c) for c in columns):
            missing.append("embedding_<width>")
        if missing:
            raise LiveStoreError(f"{self.schema}.{PAGES_TABLE} lacks the column{'s' * (len(missing) > 1)} "
                                 f"{', '.join(missing)} that kbench reads (Archon's schema: "
                                 f"{', '.join(REQUIRED_COLUMNS)}, one embedding_<width> per model width); point "
                                 "store.live_schema at a table written by Archon or kbench")

    def _check_role(self, allow_write: bool) -> None:
        with self.conn.cursor() as cur:
            role, can_write = cur.execute(
                "SELECT current_user, has_table_privilege(format('%%I.%%I', %s::text, %s::text), "
                "'INSERT, UPDATE, DELETE, TRUNCATE')", [self.schema, PAGES_TABLE]).fetchone()
        if can_write and not allow_write:
            raise LiveStoreError(
                f"role {role} can write to {self.schema}.{PAGES_TABLE}; kbench evaluates a live store read-only. "
                "Connect as a role with SELECT only (GRANT SELECT ON ALL TABLES IN SCHEMA ... TO reader), or set "
                "store.allow_write: true to go on anyway (every statement still runs in a READ ONLY transaction)")

    # ------------------------------------------------------------------ rows
    def read_rows(self) -> LiveRows:
        columns = self._columns()
        with self.conn.cursor() as cur:
            models = cur.execute(f"SELECT embedding_model, embedding_dimension, count(*) FROM {PAGES_TABLE} "
                                 "GROUP BY 1, 2 ORDER BY 3 DESC").fetchall()
        if not models:
            raise LiveStoreError(f"{self.schema}.{PAGES_TABLE} holds no rows")
        if len(models) > 1:
            raise LiveStoreError(f"{self.schema}.{PAGES_TABLE} holds rows of several models "
                                 f"({', '.join(f'{m} ({d}-d, {n} rows)' for m, d, n in models)}); production "
                                 "searches one column per query width, so kbench evaluates one model at a time")
        model, dimension, _ = models[0]
        column = embedding_column(int(dimension))
        if column not in columns:
            widths = ", ".join(sorted(c for c in columns if VECTOR_COLUMN.fullmatch(c)))
            raise LiveStoreError(f"the rows name {int(dimension)}-d vectors of {model!r} but {self.schema}."
                                 f"{PAGES_TABLE} has no column {column} (it has "
                                 f"{widths})")
        offsets = "chunk_start, chunk_end" if {"chunk_start", "chunk_end"} <= columns else "NULL, NULL"
        with self.conn.cursor() as cur:
            rows = cur.execute(
                f"SELECT id::text, url, coalesce(source_id::text, ''), chunk_number, content, {offsets}, "
                f"{column}::text FROM {PAGES_TABLE} WHERE {column} IS NOT NULL "
                "ORDER BY url, chunk_number, id").fetchall()
            (missing,) = cur.execute(f"SELECT count(*) FROM {PAGES_TABLE} WHERE {column} IS NULL").fetchone()
        vectors = np.array([json.loads(r[7]) for r in rows], dtype=np.float32).reshape(len(rows), int(dimension))
        self._check_functions(int(dimension))
        return LiveRows([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows],
                        [r[4] or "" for r in rows], [r[5] for r in rows], [r[6] for r in rows], vectors, model,
                        int(dimension), int(missing))

    def _check_functions(self, dimension: int) -> None:
        """Which production search functions would read another width's column than the rows fill."""
        names = [MATCH_FUNCTION, *HYBRID_FUNCTIONS.values()]
        with self.conn.cursor() as cur:
            found = cur.execute("SELECT p.proname, pg_get_functiondef(p.oid) FROM pg_proc p JOIN pg_namespace n "
                                "ON n.oid = p.pronamespace WHERE n.nspname = %s AND p.proname = ANY(%s)",
                                [self.schema, names]).fetchall()
        for name, body in found:
            fixed = sorted({int(d) for d in re.findall(r"embedding_(\d+)", body)})
            if fixed and dimension not in fixed:
                self.function_problems[name] = (
                    f"production's {name} reads {', '.join(f'embedding_{d}' for d in fixed)} but the rows' "
                    f"{dimension}-d vectors are in embedding_{dimension}: in production every search through it "
                    "returns nothing (Archon's empty results for 768- and 1024-d models). Fix the function to pick "
                    "the column from the query's width; kbench does not hide this by searching another column")
        for name in names:
            if name not in {n for n, _ in found}:
                self.function_problems.setdefault(name, f"schema {self.schema} has no function {name}")

    def map_rows(self, chunks: list[Chunk]) -> None:
        """Row UUID -> index in the run's chunk list (chunks carry their row id in metadata)."""
        self._ids = {c.metadata["row_id"]: i for i, c in enumerate(chunks)}

    def collection(self, rows: LiveRows) -> Collection:
        return Collection(name=f"live-{self.schema}", dataset=f"live:{self.schema}", chunker="stored",
                          embedding_model=rows.model, embedding_dimension=rows.dimension, llm_chat_model=None,
                          config={})

    # ------------------------------------------------------------------ searches (production's own functions)
    def check_function(self, function: str) -> None:
        if function in self.function_problems:
            raise LiveStoreError(self.function_problems[function])

    def match(self, query_vector: np.ndarray, match_count: int) -> list[tuple[int, float]]:
        self.check_function(MATCH_FUNCTION)
        return super().match(query_vector, match_count)

    def hybrid(self, function: str, query_vector: np.ndarray, query_text: str, match_count: int,
               similarity_threshold: float = 0.05, rrf_k: int = 10,
               query_lang: str = "english") -> list[tuple[int, float, str]]:
        self.check_function(HYBRID_FUNCTIONS.get(function, function))
        return super().hybrid(function, query_vector, query_text, match_count, similarity_threshold, rrf_k,
                              query_lang)


# --------------------------------------------------------------------------- documents and questions
def rebuild_pages(rows: LiveRows) -> tuple[list[Document], list[Chunk]]:
    """One document per URL and its chunks as stored (see the module doc for where each chunk is placed)."""
    by_url: dict[str, list[int]] = {}
    for i, url in enumerate(rows.urls):
        by_url.setdefault(url, []).append(i)
    documents, chunks = [], []
    for url, members in by_url.items():
        members.sort(key=lambda i: (rows.chunk_numbers[i] if rows.chunk_numbers[i] is not None else -1, i))
        placed = rows.has_offsets and all(rows.ends[i] - rows.starts[i] == len(rows.contents[i]) for i in members)
        if placed:
            buffer = [" "] * max(rows.ends[i] for i in members)
            for i in members:
                buffer[rows.starts[i]:rows.ends[i]] = rows.contents[i]
            text, spans = "".join(buffer), [(rows.starts[i], rows.ends[i]) for i in members]
        else:
            spans, position = [], 0
            for i in members:
                spans.append((position, position + len(rows.contents[i])))
                position += len(rows.contents[i]) + len(JOINER)
            text = JOINER.join(rows.contents[i] for i in members)
        documents.append(Document(url, text, title=url, url=url, source_id=rows.source_ids[members[0]],
                                  metadata={"rebuilt_from": "offsets" if placed else "joined"}))
        for n, (i, (start, end)) in enumerate(zip(members, spans)):
            chunks.append(Chunk(url, n, start, end, rows.contents[i],
                                metadata={"row_id": rows.row_ids[i], "stored_chunk_number": rows.chunk_numbers[i]}))
    return documents, chunks


def locate(text: str, needle: str) -> tuple[int, int] | None:
    """Where ``needle`` sits in ``text``: exactly, else with runs of whitespace matching any whitespace."""
    if not needle.strip():
        return None
    at = text.find(needle)
    if at >= 0:
        return at, at + len(needle)
    pattern = r"\s+".join(re.escape(word) for word in needle.split())
    found = re.search(pattern, text)
    return (found.start(), found.end()) if found else None


def build_live_dataset(folder: Path, documents: list[Document], rows: LiveRows, name: str) -> Dataset:
    """The question set in ``folder/questions.jsonl`` mapped onto the live documents.

    Each line: ``{"query_id", "question", "references": [{"url" | "source_id", "start_index"?, "end_index"?,
    "content"?}]}``. Offsets are used when the pages were rebuilt from stored offsets; otherwise the reference's
    content is located in the page (or in the source's pages). A reference with neither makes its documents
    relevant at document level. References that match nothing are dropped and counted, like any loader's."""
    by_url = {d.url: d for d in documents}
    by_source: dict[str, list[Document]] = {}
    for d in documents:
        by_source.setdefault(d.source_id, []).append(d)
    queries, spans, qrels = [], {}, {}
    skipped: dict[str, list[str]] = {}
    path = dataset_file(folder, "questions.jsonl")
    example = '{"query_id": "q1", "question": "...", "references": [{"url": "https://...", "content": "..."}]}'
    for line, row in iter_jsonl(path, example):
        where = f"{path}:{line}"
        qid, question = get_id(row, "query_id", where), get_text(row, "question", where, required=True)
        queries.append(Query(qid, question))
        for ref in row.get("references") or []:
            if ref.get("url"):
                docs = [by_url[ref["url"]]] if ref["url"] in by_url else []
            else:
                docs = by_source.get(str(ref.get("source_id", "")), [])
            if not docs:
                skipped.setdefault("reference_to_unknown_document", []).append(where)
                continue
            start, end, content = ref.get("start_index"), ref.get("end_index"), ref.get("content") or ""
            if start is not None and end is not None and len(docs) == 1 and \
                    docs[0].metadata.get("rebuilt_from") == "offsets":
                spans.setdefault(qid, []).append(Span(docs[0].doc_id, int(start), int(end)))
            elif content:
                found = next(((d, at) for d in docs if (at := locate(d.text, content))), None)
                if found is None:
                    skipped.setdefault("reference_text_not_in_store", []).append(where)
                    continue
                spans.setdefault(qid, []).append(Span(found[0].doc_id, *found[1]))
            else:
                for d in docs:
                    qrels.setdefault(qid, {})[d.doc_id] = 1
    if not queries:
        raise DatasetError(f"{path}: no questions")
    for qid, grades in doc_qrels_from_spans(spans).items():
        for doc_id, grade in grades.items():
            qrels.setdefault(qid, {})[doc_id] = max(grade, qrels.get(qid, {}).get(doc_id, 0))
    return Dataset(name, documents, queries, qrels, spans, skipped,
                   content_hash=stable_hash([rows.content_hash(), folder_content_hash(folder)]))



# --------------------------------------------------------------------------- snapshot to a dataset folder
def snapshot_file_name(url: str, taken: set[str]) -> str:
    """A relative path under docs/ for a page's URL: scheme dropped, unsafe characters replaced, never '..'."""
    path = re.sub(r"[^A-Za-z0-9._/-]+", "_", url.split("://", 1)[-1])
    parts = [p for p in path.split("/") if p not in ("", ".", "..")] or ["page"]
    name = "/".join(parts)
    name = name if name.lower().endswith(".md") else f"{name}.md"
    stem, n = name[:-3], 1
    while name in taken:
        n += 1
        name = f"{stem}-{n}.md"
    taken.add(name)
    return name


def write_snapshot(store: LiveStore, out: Path, questions: Path | None = None) -> dict:
    """The live rows as a kbench span dataset in ``out`` (an empty folder): ``docs/`` one file per page rebuilt
    from its chunks, ``snapshot.json`` (how each page was rebuilt and chunked: every chunk's row id, number and
    offsets; the model and width), and ``questions.jsonl``: a live question set mapped onto the files, or empty
    for questions to be added. Returns the manifest."""
    rows = store.read_rows()
    documents, chunks = rebuild_pages(rows)
    taken: set[str] = set()
    file_of = {d.doc_id: snapshot_file_name(d.url, taken) for d in documents}
    for d in documents:
        target = out / "docs" / file_of[d.doc_id]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(d.text, encoding="utf-8")
    pages = {d.doc_id: {"file": file_of[d.doc_id], "url": d.url, "source_id": d.source_id,
                        "rebuilt_from": d.metadata["rebuilt_from"], "chunks": []} for d in documents}
    for c in chunks:
        pages[c.doc_id]["chunks"].append({"chunk_number": c.chunk_number, "start": c.start, "end": c.end,
                                          "row_id": c.metadata["row_id"],
                                          "stored_chunk_number": c.metadata["stored_chunk_number"]})
    lines = []
    if questions is not None:
        dataset = build_live_dataset(questions, documents, rows, "snapshot")
        text_of = {d.doc_id: d.text for d in documents}
        for q in dataset.queries:
            refs = [{"doc_id": file_of[s.doc_id], "start_index": s.start, "end_index": s.end,
                     "content": text_of[s.doc_id][s.start:s.end]} for s in dataset.spans.get(q.query_id, [])]
            if refs:
                lines.append(json.dumps({"query_id": q.query_id, "question": q.text, "references": refs}))
    (out / "questions.jsonl").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    manifest = {"schema": store.schema, "table": PAGES_TABLE, "embedding_model": rows.model,
                "embedding_dimension": rows.dimension, "rows": len(chunks), "pages": len(documents),
                "rows_without_vector": rows.rows_without_vector, "content_hash": rows.content_hash(),
                "questions": len(lines), "chunking": "stored (chunks as production wrote them; see pages)",
                "documents": list(pages.values())}
    (out / "snapshot.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    return manifest
