"""Real leg outputs for fusion tests: the demo set's chunks, MiniLM vectors through kbench's vector leg,
and a BM25 leg computed here with rank_bm25 (so fusion can be tested before kbench's own keyword legs)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from kbench.chunking import chunk_corpus
from kbench.config import ChunkingConfig, DatasetConfig, EmbeddingConfig, StoreConfig
from kbench.datasets import load_dataset
from kbench.records import Chunk, Dataset
from kbench.retrieval.registry import LegResult, SearchContext

DEMO_CHUNKING = {"strategy": "fixed", "chunk_size": 600, "chunk_overlap": 100}  # as tests/conftest.make_config


@dataclass
class DemoLegs:
    dataset: Dataset
    chunks: list[Chunk]
    context: SearchContext
    query_vectors: np.ndarray
    vector: list[LegResult]  # per query, cosine best first
    bm25: list[LegResult]  # per query, BM25Okapi score best first, score > 0 only


def tokenize(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


@lru_cache(maxsize=2)
def demo_legs(workspace: str, depth: int = 60) -> DemoLegs:
    from rank_bm25 import BM25Okapi

    from kbench.embedding.stage import CachedEmbedder
    from kbench.retrieval.legs.vector import VectorLeg, VectorParams
    from kbench.store.faiss_index import VectorIndex

    dataset = load_dataset(DatasetConfig(name="demo"))
    chunks = chunk_corpus(dataset.documents, ChunkingConfig(**DEMO_CHUNKING))
    embedder = CachedEmbedder(EmbeddingConfig(), Path(workspace) / "cache")
    embedded = embedder.embed([c.text for c in chunks])
    assert not embedded.failed
    context = SearchContext(chunks, embedded.vectors, VectorIndex.build(embedded.vectors, StoreConfig()),
                            embedder.embed_queries, Path(workspace))
    query_vectors = embedder.embed_queries([q.text for q in dataset.queries])
    vector = VectorLeg(context, VectorParams()).search(dataset.queries, query_vectors, depth)
    bm25_model = BM25Okapi([tokenize(c.text) for c in chunks])
    bm25 = []
    for q in dataset.queries:
        scores = bm25_model.get_scores(tokenize(q.text))
        order = np.argsort(-scores, kind="stable")[:depth]
        bm25.append([(int(i), float(scores[i])) for i in order if scores[i] > 0])
    return DemoLegs(dataset, chunks, context, query_vectors, vector, bm25)
