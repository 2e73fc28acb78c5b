"""Chunk a whole corpus with the configured strategy and attach per-chunk metadata."""
from __future__ import annotations

from pathlib import Path

from kbench.chunking.metadata import text_metadata
from kbench.chunking.registry import CHUNKERS
from kbench.chunking.config import ChunkingConfig
from kbench.records import Chunk, Document
from kbench.cache import ChunkCache, chunker_fingerprint, document_key


def chunk_document(document: Document, config: ChunkingConfig, params=None) -> list[Chunk]:
    """One document's chunks with reference 000's text metadata, the chunker's name and its knobs."""
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
