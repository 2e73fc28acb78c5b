"""Chunk a whole corpus with the configured strategy and attach per-chunk metadata."""
from __future__ import annotations

from kbench.chunking.metadata import text_metadata
from kbench.chunking.registry import CHUNKERS
from kbench.config import ChunkingConfig
from kbench.records import Chunk, Document


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


def chunk_corpus(documents: list[Document], config: ChunkingConfig) -> list[Chunk]:
    params = config.params
    chunks: list[Chunk] = []
    for document in documents:
        chunks.extend(chunk_document(document, config, params))
    return chunks
