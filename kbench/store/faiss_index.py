"""FAISS indexes over L2-normalized vectors: inner product = cosine similarity.

``flat`` is exact; ``hnsw`` (M, efSearch) and ``ivf`` (nlist like production's ivfflat lists=100,
nprobe) are approximate, and the run reports their recall against flat.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from kbench.config import StoreConfig


class VectorIndex:
    def __init__(self, index, kind: str, config: StoreConfig):
        self.index, self.kind, self.config = index, kind, config
        self._apply_search_params()

    @classmethod
    def build(cls, vectors: np.ndarray, config: StoreConfig, ids: np.ndarray | None = None) -> "VectorIndex":
        """Index ``vectors``; row i gets id ``ids[i]`` (default i). Failed rows are left out by the caller."""
        import faiss

        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        n, dim = vectors.shape
        ids = np.arange(n, dtype=np.int64) if ids is None else np.asarray(ids, dtype=np.int64)
        if config.index == "flat":
            base = faiss.IndexFlatIP(dim)
        elif config.index == "hnsw":
            base = faiss.IndexHNSWFlat(dim, config.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            base.hnsw.efConstruction = config.hnsw_ef_construction
        else:
            nlist = max(1, min(config.ivf_nlist, n // 39 or 1))  # FAISS wants ~39 points per list to train
            quantizer = faiss.IndexFlatIP(dim)
            base = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
            base.train(vectors)
        index = faiss.IndexIDMap2(base)
        index.add_with_ids(vectors, ids)
        return cls(index, config.index, config)

    def _apply_search_params(self) -> None:
        import faiss

        base = faiss.downcast_index(self.index.index) if hasattr(self.index, "index") else self.index
        if self.kind == "hnsw":
            base.hnsw.efSearch = self.config.hnsw_ef_search
        elif self.kind == "ivf":
            base.nprobe = self.config.ivf_nprobe

    @property
    def ntotal(self) -> int:
        return int(self.index.ntotal)

    def search(self, queries: np.ndarray, k: int, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (scores, ids) per query; ``mask[i]`` False excludes id i (a filter). Missing slots are -1."""
        import faiss

        queries = np.ascontiguousarray(queries, dtype=np.float32)
        k = max(1, min(k, self.ntotal)) if self.ntotal else 1
        if self.ntotal == 0:
            return np.zeros((len(queries), 0), np.float32), np.zeros((len(queries), 0), np.int64)
        params = None
        if mask is not None:
            allowed = np.flatnonzero(mask).astype(np.int64)
            params = faiss.SearchParameters(sel=faiss.IDSelectorBatch(allowed))
        scores, ids = self.index.search(queries, k, params=params)
        return scores, ids

    def save(self, path: Path) -> None:
        import faiss

        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        faiss.write_index(self.index, str(tmp))
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path, config: StoreConfig) -> "VectorIndex":
        import faiss

        return cls(faiss.read_index(str(path)), config.index, config)
