"""What both production-shaped stores share: collections, rows, and the incremental sync of a corpus.

A *collection* is one chunking of one corpus embedded by one model: its name hashes the dataset, the
resolved chunking and enrichment config and the embedding cache namespace (model, revision, dimension,
normalization, prefixes). Rows of different collections never mix, the way a production deployment runs
one chunker and one model.

Sync follows the GWI spec's incremental updates: a page (document) whose state is unchanged is
skipped, a changed one has its rows deleted and rewritten, a page no longer in the corpus is deleted
by source. A page's state hashes its document key and the content hashes of the chunks that were
stored, so a chunk whose embedding failed last time and succeeds now rewrites the page.

Rows carry only real vectors: a chunk whose embedding failed is written to the failure table, never
as a zero or NULL vector (the Archon replication guide: "never store zero/null embeddings").
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from kbench.cache import document_key
from kbench.chunking.config import ChunkingConfig
from kbench.datasets.config import DatasetConfig
from kbench.enrichment.config import EnrichmentConfig
from kbench.hashing import sha256_text, stable_hash
from kbench.records import Chunk, Document
from kbench.errors import UserError

# The per-dimension columns of Archon, plus MiniLM's 384; other widths are added on demand.
STANDARD_DIMENSIONS = (384, 768, 1024, 1536, 3072)


class StoreDimensionError(UserError, ValueError):
    """A vector written to (or searched in) a column of another width: the bug behind empty results."""


def embedding_column(dimension: int) -> str:
    if not isinstance(dimension, (int, np.integer)) or dimension < 1:
        raise StoreDimensionError(f"embedding dimension must be a positive integer, got {dimension!r}")
    return f"embedding_{int(dimension)}"


def check_column_width(column: str, vectors: np.ndarray, model: str, declared_dimension: int) -> None:
    """Refuse a write whose vectors, model and target column disagree on the width."""
    width = int(vectors.shape[1]) if vectors.ndim == 2 else -1
    if width != declared_dimension:
        raise StoreDimensionError(
            f"model {model!r} declares {declared_dimension} dimensions but its vectors have {width}; "
            f"refusing to write them to column {column!r}"
        )
    expected = embedding_column(declared_dimension)
    if column != expected:
        raise StoreDimensionError(
            f"model {model!r} produces {declared_dimension}-dimensional vectors, which belong in column "
            f"{expected!r}; refusing to write them to column {column!r} (the mismatch that leaves a "
            f"{declared_dimension}-d model with empty search results)"
        )


@dataclass(frozen=True)
class Collection:
    name: str
    dataset: str
    chunker: str
    embedding_model: str
    embedding_dimension: int
    llm_chat_model: str | None = None
    identity: dict[str, object] = field(default_factory=dict, compare=False, hash=False)  # what its name hashes
    embedding_namespace: str = field(default="", compare=False, hash=False)  # the vector cache's namespace


def dataset_identity(dataset: DatasetConfig) -> tuple[str, dict[str, str | None]]:
    """(a short name, what identifies the dataset) for collection names: max_documents/max_queries do not split
    a collection."""
    name = dataset.name or (dataset.path or "data").rstrip("/").rsplit("/", 1)[-1]
    return name, {"name": dataset.name, "path": dataset.path, "subset": dataset.subset}


def make_collection(dataset: DatasetConfig, chunking: ChunkingConfig, enrichment: EnrichmentConfig,
                    embedding_model: str, embedding_namespace: str, dimension: int) -> Collection:
    """The collection a run's chunks are written to (see module doc)."""
    dataset_name, dataset_id = dataset_identity(dataset)
    key = {
        "dataset": dataset_id,
        "chunking": chunking.model_dump(mode="json"),
        # the code-example index is a collection of its own: its knobs never rename the pages' collection
        "enrichment": enrichment.model_dump(mode="json", exclude={"code_examples"}),
        "embedding": embedding_namespace,
    }
    name = f"{dataset_name}-{chunking.strategy}-{stable_hash(key, 12)}"
    return Collection(
        name=name.replace("/", "_").replace(" ", "_"), dataset=dataset_name, chunker=chunking.strategy,
        embedding_model=embedding_model, embedding_dimension=int(dimension),
        llm_chat_model=enrichment.model if enrichment.enabled else None, identity=key,
        embedding_namespace=embedding_namespace,
    )


@dataclass
class PageRows:
    """One document's rows: the chunks that have vectors, by their index in the run's chunk list."""

    document: Document
    chunk_indices: list[int]
    failed_indices: list[int]
    state: str = ""


@dataclass
class SyncReport:
    pages_written: int = 0
    pages_unchanged: int = 0
    pages_deleted: int = 0
    rows_written: int = 0
    rows_deleted: int = 0
    rows_total: int = 0
    failed_chunks: int = 0

    def counts(self) -> dict[str, int]:
        return {f"store_{k}": v for k, v in self.__dict__.items()}


def group_pages(documents: list[Document], chunks: list[Chunk], ok_mask: np.ndarray) -> list[PageRows]:
    by_doc: dict[str, PageRows] = {d.doc_id: PageRows(d, [], []) for d in documents}
    for i, chunk in enumerate(chunks):
        page = by_doc.get(chunk.doc_id)
        if page is None:
            raise ValueError(f"chunk {chunk.chunk_id} names document {chunk.doc_id!r}, which is not in the corpus")
        (page.chunk_indices if ok_mask[i] else page.failed_indices).append(i)
    for page in by_doc.values():
        page.state = stable_hash([document_key(page.document),
                                  [(chunks[i].chunk_number, sha256_text(chunks[i].text)) for i in page.chunk_indices]],
                                 length=32)
    return list(by_doc.values())


def row_columns(collection: Collection, pages: list[PageRows], chunks: list[Chunk]) -> dict[str, list]:
    """Column name -> values for the non-vector columns of archon_crawled_pages, in page order."""
    cols: dict[str, list] = {k: [] for k in ("url", "chunk_number", "content", "metadata", "source_id", "page_id",
                                             "chunk_start", "chunk_end", "content_hash")}
    for page in pages:
        doc = page.document
        for i in page.chunk_indices:
            c = chunks[i]
            cols["url"].append(doc.url or doc.doc_id)
            cols["chunk_number"].append(c.chunk_number)
            cols["content"].append(c.text)
            cols["metadata"].append(json.dumps(c.metadata, sort_keys=True, default=str))
            cols["source_id"].append(doc.source_id or collection.dataset)
            cols["page_id"].append(doc.doc_id)
            cols["chunk_start"].append(c.start)
            cols["chunk_end"].append(c.end)
            cols["content_hash"].append(sha256_text(c.text))
    return cols


@dataclass
class PageBatch:
    """The rows ``insert_pages`` writes, checked once for every backend before anything is written."""

    column: str  # the embedding column of the collection's width
    columns: dict[str, list]  # row_columns: the non-vector columns, one value per row
    vectors: np.ndarray  # (rows, dim) float32, every row finite and non-zero
    failed: list[tuple[str, int, str, str]]  # (page_id, chunk_number, content_hash, reason) of unembedded chunks


def page_vectors(collection: Collection, pages: list[PageRows], vectors: np.ndarray,
                 column: str | None = None) -> tuple[str, np.ndarray]:
    """(column, the vectors of ``pages``' rows), refusing a column of another width and a zero or non-finite vector."""
    dim = collection.embedding_dimension
    column = column or embedding_column(dim)
    check_column_width(column, vectors, collection.embedding_model, dim)
    rows = [i for p in pages for i in p.chunk_indices]
    block = np.ascontiguousarray(vectors[rows], dtype=np.float32) if rows else np.zeros((0, dim), np.float32)
    if rows and not (np.isfinite(block).all() and (np.abs(block).sum(axis=1) > 0).all()):
        raise ValueError("refusing to store a zero or non-finite vector (record it as a failed embedding)")
    return column, block


def page_groups(pages: list[PageRows], max_rows: int) -> list[list[PageRows]]:
    """``pages`` in order, cut into runs of at most ``max_rows`` stored rows (a larger page is a run of its own),
    so a backend writes a large sync in bounded pieces."""
    groups: list[list[PageRows]] = [[]]
    rows = 0
    for page in pages:
        if groups[-1] and rows + len(page.chunk_indices) > max_rows:
            groups.append([])
            rows = 0
        groups[-1].append(page)
        rows += len(page.chunk_indices)
    return groups if groups[0] else []


def page_batch(collection: Collection, pages: list[PageRows], chunks: list[Chunk], vectors: np.ndarray,
               failures: dict[int, str], column: str | None = None) -> PageBatch:
    """The rows of ``pages``, refusing a column of another width and a zero or non-finite vector."""
    column, block = page_vectors(collection, pages, vectors, column)
    failed = [(chunks[i].doc_id, chunks[i].chunk_number, sha256_text(chunks[i].text), failures.get(i, "not embedded"))
              for p in pages for i in p.failed_indices]
    return PageBatch(column, row_columns(collection, pages, chunks), block, failed)


class ProductionStore:
    """Incremental sync over a backend's primitives (DuckDB and PostgreSQL implement them)."""

    def existing_pages(self, collection: Collection) -> dict[str, str]:  # page_id -> state
        raise NotImplementedError

    def delete_pages(self, collection: Collection, page_ids: list[str]) -> int:
        raise NotImplementedError

    def insert_pages(self, collection: Collection, pages: list[PageRows], chunks: list[Chunk],
                     vectors: np.ndarray, failures: dict[int, str]) -> int:
        raise NotImplementedError

    def count_rows(self, collection: Collection) -> int:
        raise NotImplementedError

    def register_collection(self, collection: Collection) -> None:
        raise NotImplementedError

    def sync(self, collection: Collection, documents: list[Document], chunks: list[Chunk], vectors: np.ndarray,
             failed: dict[int, str]) -> SyncReport:
        """Make the collection hold exactly ``documents``' chunks with their (successful) vectors."""
        ok_mask = np.ones(len(chunks), dtype=bool)
        ok_mask[list(failed)] = False
        if len(chunks) and vectors.shape[0] != len(chunks):
            raise ValueError(f"{vectors.shape[0]} vectors for {len(chunks)} chunks")
        if len(chunks):
            check_column_width(embedding_column(collection.embedding_dimension), vectors, collection.embedding_model,
                               collection.embedding_dimension)
        self.register_collection(collection)
        pages = group_pages(documents, chunks, ok_mask)
        existing = self.existing_pages(collection)
        report = SyncReport(failed_chunks=len(failed))
        current = {p.document.doc_id for p in pages}
        gone = [pid for pid in existing if pid not in current]
        changed = [p for p in pages if existing.get(p.document.doc_id) != p.state]
        report.pages_unchanged = len(pages) - len(changed)
        stale = gone + [p.document.doc_id for p in changed if p.document.doc_id in existing]
        report.rows_deleted = self.delete_pages(collection, stale) if stale else 0
        report.pages_deleted = len(gone)
        if changed:
            report.rows_written = self.insert_pages(collection, changed, chunks, vectors, failed)
        report.pages_written = len(changed)
        report.rows_total = self.count_rows(collection)
        expected = int(ok_mask.sum())
        if report.rows_total != expected:
            raise RuntimeError(f"store {collection.name}: {report.rows_total} rows after sync, expected {expected}")
        return report
