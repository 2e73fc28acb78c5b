"""``vector``: cosine similarity of the query embedding to every chunk embedding (production's match_*)."""
from __future__ import annotations

import numpy as np
from pydantic import Field

from kbench.records import Query
from kbench.registry import StrictModel
from kbench.retrieval.contracts import Leg, LegResult, SearchContext
from kbench.retrieval.registry import LEGS


class VectorParams(StrictModel):
    similarity_threshold: float | None = Field(
        None, description="drop results with cosine <= this (Archon uses 0.05 in its hybrid)"
    )


@LEGS.register("vector", VectorParams)
class VectorLeg(Leg):
    """Cosine similarity over the store's vector index (FAISS inner product on normalized vectors)."""

    needs_query_vectors = True
    scores_any_unit = True

    def __init__(self, context: SearchContext, params: VectorParams):
        if context.vector_index is None:
            raise ValueError("the vector leg needs embedded chunks; the run built no vector index")
        self.index, self.params = context.vector_index, params
        self.vectors = context.chunk_vectors

    def score(self, queries: list[Query], query_vectors: np.ndarray, rows: list[np.ndarray]) -> list[np.ndarray]:
        """The cosine of each unit in ``rows`` to its query (the vectors are L2-normalized), thresholded or not."""
        if self.vectors is None:
            raise ValueError("the vector leg cannot score units it did not return: the run kept no unit vectors")
        return [self.vectors[r] @ query_vectors[i] for i, r in enumerate(rows)]

    def search(self, queries: list[Query], query_vectors: np.ndarray, k: int,
               mask: np.ndarray | None = None) -> list[LegResult]:
        scores, ids = self.index.search(query_vectors, k, mask=mask)
        threshold = self.params.similarity_threshold
        results = []
        for row_ids, row_scores in zip(ids, scores):
            keep = [(int(i), float(s)) for i, s in zip(row_ids, row_scores) if i >= 0]
            if threshold is not None:
                keep = [(i, s) for i, s in keep if s > threshold]
            results.append(keep)
        return results
