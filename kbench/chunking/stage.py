"""Chunk a whole corpus with the configured strategy and attach per-chunk metadata."""
from __future__ import annotations

from pathlib import Path

from kbench.chunking.metadata import text_metadata
from kbench.chunking.registry import CHUNKERS
from kbench.chunking.config import ChunkingConfig
from kbench.datasets import read_dataset
from kbench.datasets.config import DatasetConfig
from kbench.errors import RunError
from kbench.records import Chunk, Dataset, Document
from kbench.cache import ChunkCache, chunker_fingerprint, document_key
from kbench.trace import StageTimer


def chunk_document(document: Document, config: ChunkingConfig, params=None) -> list[Chunk]:
    """One document's chunks with Archon's text metadata, the chunker's name and its knobs."""
    params = config.params if params is None else params
    chunks = CHUNKERS.get(config.strategy).impl(document, params)
    knobs = params.model_dump()
    for chunk in chunks:
        chunk.metadata.setdefault("chunker", config.strategy)
        chunk.metadata.setdefault("chunker_params", knobs)
        for key, value in text_metadata(chunk.text, document.doc_type).items():
            chunk.metadata.setdefault(key, value)
    return chunks


def chunk_corpus(documents: list[Document], config: ChunkingConfig, *, cache_dir: Path | None = None,
                 stats: dict[str, int] | None = None) -> list[Chunk]:
    """Every document's chunks, in order. With ``cache_dir``, a document chunked before by the same chunker,
    params and chunker code comes from the chunk cache (kbench.cache.ChunkCache); ``stats`` (if given)
    receives chunk_cache_hits / chunk_cache_misses, counted in documents."""
    params = config.params
    if cache_dir is None:
        chunks: list[Chunk] = []
        for document in documents:
            chunks.extend(chunk_document(document, config, params))
        return chunks
    entry = CHUNKERS.get(config.strategy)
    cache = ChunkCache(cache_dir, chunker_fingerprint(config.strategy, entry.impl, params.model_dump(mode="json")))
    chunks, new_entries = [], {}
    for document in documents:
        key = document_key(document)
        cached = cache.get(key)
        if cached is not None:
            chunks.extend(Chunk(document.doc_id, c["n"], c["s"], c["e"], c["t"], c["m"]) for c in cached)
            continue
        doc_chunks = chunk_document(document, config, params)
        new_entries[key] = [{"n": c.chunk_number, "s": c.start, "e": c.end, "t": c.text, "m": c.metadata}
                            for c in doc_chunks]
        chunks.extend(doc_chunks)
    cache.put_many(new_entries)
    cache.flush_usage()
    if stats is not None:
        stats.update(chunk_cache_hits=cache.hits, chunk_cache_misses=cache.misses)
    return chunks


def chunk_dataset(dataset: Dataset, chunking: ChunkingConfig, *, cache_dir: Path | None = None,
                  timer: StageTimer | None = None, counts: dict[str, int] | None = None) -> list[Chunk]:
    """Chunk every document (through the chunk cache when ``cache_dir`` is given), timed as stage ``chunk``;
    ``counts`` receives ``chunks`` and the cache's hits and misses. No chunks at all is a RunError."""
    timer = timer or StageTimer()
    counts = {} if counts is None else counts
    chunk_stats: dict[str, int] = {}
    with timer.stage("chunk"):
        chunks = chunk_corpus(dataset.documents, chunking, cache_dir=cache_dir, stats=chunk_stats)
    counts.update(chunk_stats)  # chunk_cache_hits / chunk_cache_misses, in documents
    if not chunks:
        raise RunError(f"chunking.strategy {chunking.strategy!r} produced no chunks from "
                       f"{len(dataset.documents)} documents; check the dataset and the chunker's knobs")
    counts["chunks"] = len(chunks)
    return chunks


def chunked_dataset(dataset: DatasetConfig, chunking: ChunkingConfig, *, cache_dir: Path | None = None,
                    timer: StageTimer | None = None, counts: dict[str, int] | None = None
                    ) -> tuple[Dataset, list[Chunk]]:
    """``read_dataset`` then ``chunk_dataset``: what a command that rebuilds a logged run's chunks needs."""
    timer = timer or StageTimer()
    loaded = read_dataset(dataset, timer=timer, counts=counts)
    return loaded, chunk_dataset(loaded, chunking, cache_dir=cache_dir, timer=timer, counts=counts)
