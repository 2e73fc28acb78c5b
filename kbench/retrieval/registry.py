"""Retrieval registries: legs (first-stage rankers), fusion methods and rerankers, by config name.

- A leg is a class built once per run from the chunks (``Leg.build(context, params)``) whose
  ``search(queries, query_vectors, k, mask)`` returns, per query, ``[(chunk_index, score), ...]`` best first.
- A fusion is a pure function ``fuse(leg_results, params, top_k) -> list[Hit]`` for one query, where
  ``leg_results`` maps leg name to that leg's ranked ``[(chunk_index, score)]``.
- A reranker is a class built once per run (``Reranker(context, params)``) whose
  ``rerank(query_text, hits, top_k) -> list[Hit]`` rescoring the candidates of one query.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from kbench.records import Chunk, Hit
from kbench.registry import Registry

LegResult = list[tuple[int, float]]
FusionFn = Callable[[dict[str, LegResult], Any, int], list[Hit]]

LEGS: Registry[type] = Registry("retrieval.legs")
FUSIONS: Registry[FusionFn] = Registry("retrieval.fusion.method")
RERANKERS: Registry[type] = Registry("rerank.method")


@dataclass
class SearchContext:
    """What legs and rerankers may use: the run's chunks, their vectors and the query encoder."""

    chunks: list[Chunk]
    chunk_vectors: np.ndarray | None = None  # (n_chunks, dim), L2-normalized, row i = chunks[i]
    vector_index: Any = None  # kbench.store.faiss_index.VectorIndex over chunk_vectors
    embed_queries: Callable[[list[str]], np.ndarray] | None = None
    workspace: Path = Path("experiments")
    extras: dict[str, Any] = field(default_factory=dict)
