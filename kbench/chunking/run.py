"""Chunk a whole corpus with the configured strategy and attach per-chunk metadata."""
from __future__ import annotations

from kbench.chunking.registry import CHUNKERS
from kbench.config import ChunkingConfig
from kbench.records import Chunk, Document


def chunk_corpus(documents: list[Document], config: ChunkingConfig) -> list[Chunk]:
    entry = CHUNKERS.get(config.strategy)
    params = config.params
    chunks: list[Chunk] = []
    for document in documents:
        for chunk in entry.impl(document, params):
            chunk.metadata.setdefault("chunker", config.strategy)
            chunks.append(chunk)
    return chunks
