"""FAISS indexes over L2-normalized vectors: inner product = cosine similarity.

``flat`` is exact; ``hnsw`` (M, efSearch) and ``ivf`` (nlist like production's ivfflat lists=100,
nprobe) are approximate, and the run reports their recall against flat.

``load_or_build`` persists an index beside the DuckDB file, one per (collection, kind, build params);
a sidecar JSON records the state hash of the rows it holds, so a re-run with the same rows reopens the
file instead of rebuilding, and any change to the rows rebuilds it.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from kbench.store.config import StoreConfig
from kbench.hashing import stable_hash
from kbench.cache import atomic_write_file, atomic_write_text, remove_abandoned_temps
from kbench.packages import optional_import

NEEDED_FOR = "the FAISS vector index (a vector leg's search)"


def faiss_module():
    """faiss, imported on first use; missing or broken: one line naming faiss-cpu and its install (a run checks it
    before any work: ``store.stage.check_store``)."""
    return optional_import("faiss", NEEDED_FOR)


class VectorIndex:
    def __init__(self, index, kind: str, config: StoreConfig):
        self.index, self.kind, self.config = index, kind, config
        self._apply_search_params()

    @classmethod
    def build(cls, vectors: np.ndarray, config: StoreConfig, ids: np.ndarray | None = None) -> "VectorIndex":
        """Index ``vectors``; row i gets id ``ids[i]`` (default i). Failed rows are left out by the caller."""
        faiss = faiss_module()
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
        faiss = faiss_module()
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
        faiss = faiss_module()
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
        faiss = faiss_module()
        # a temp file named after this writer: two workers never share one, a killed save's is swept
        atomic_write_file(path, lambda tmp: faiss.write_index(self.index, str(tmp)))

    @classmethod
    def load(cls, path: Path, config: StoreConfig) -> "VectorIndex":
        faiss = faiss_module()
        return cls(faiss.read_index(str(path)), config.index, config)


def build_params(config: StoreConfig) -> dict:
    """The knobs that shape an index's contents (search-time knobs efSearch/nprobe are not among them)."""
    if config.index == "hnsw":
        return {"kind": "hnsw", "m": config.hnsw_m, "ef_construction": config.hnsw_ef_construction}
    if config.index == "ivf":
        return {"kind": "ivf", "nlist": config.ivf_nlist}
    return {"kind": "flat"}


def load_or_build(folder: Path, vectors: np.ndarray, ids: np.ndarray, config: StoreConfig,
                  state: str) -> tuple[VectorIndex, bool]:
    """Reopen ``folder``'s index for these build params if it holds exactly ``state``; else build and save.

    Returns (index, reopened). The index file is renamed into place before its sidecar is written, so a
    crash in between leaves a sidecar that does not match and the next run rebuilds.
    """
    remove_abandoned_temps(folder)  # index files a killed save left (never a live writer's)
    params = build_params(config)
    stem = f"{params['kind']}-{stable_hash(params, 8)}"
    index_path, sidecar = folder / f"{stem}.faiss", folder / f"{stem}.json"
    try:
        meta = json.loads(sidecar.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        meta = {}
    if meta.get("state") == state and index_path.is_file():
        try:
            index = VectorIndex.load(index_path, config)
            if index.ntotal == len(ids):
                return index, True
        except Exception:  # noqa: BLE001 - a damaged file is rebuilt, never trusted
            pass
    index = VectorIndex.build(vectors, config, ids=ids)
    sidecar.unlink(missing_ok=True)
    index.save(index_path)
    atomic_write_text(sidecar, json.dumps({"state": state, "params": params, "ntotal": index.ntotal}, indent=2))
    return index, False


def exact_top_k(vectors: np.ndarray, ids: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    """Brute-force inner-product top-k ids per query (the ground truth for recall)."""
    scores = np.asarray(queries, dtype=np.float32) @ np.asarray(vectors, dtype=np.float32).T
    k = min(k, scores.shape[1])
    part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    order = np.take_along_axis(scores, part, axis=1).argsort(axis=1)[:, ::-1]
    return np.asarray(ids)[np.take_along_axis(part, order, axis=1)]


def recall_at_k(index, vectors: np.ndarray, ids: np.ndarray, queries: np.ndarray, k: int = 10) -> float:
    """Mean |index top-k ∩ exact top-k| / k over ``queries``; ``index`` is anything with ``search``."""
    if len(queries) == 0 or len(ids) == 0:
        return float("nan")
    k = min(k, len(ids))
    truth = exact_top_k(vectors, ids, queries, k)
    _, found = index.search(queries, k)
    hits = [len(set(t.tolist()) & set(f[f >= 0].tolist())) for t, f in zip(truth, np.asarray(found))]
    return float(np.mean(hits) / k)
