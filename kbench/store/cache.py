"""Content-addressed caches shared by every run and sweep in a workspace.

Embeddings live under ``cache/embeddings/<namespace>/``: the namespace is a hash of everything that
changes a vector (model id and revision, dimension, normalization, prefixes, enrichment prompt), and
``key.json`` beside the shards records those fields, so a namespace can be read back to its config.
Each write is one shard, ``<hash>.npz`` with text hashes (fixed-width bytes, no pickle) and float32
vectors, written to a temporary file and renamed into place, so a crash never leaves a half shard.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np


def stable_hash(data: Any, length: int = 16) -> str:
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:length]


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


class EmbeddingCache:
    """text sha256 -> vector, for one namespace (one model/dimension/normalization/prompt)."""

    def __init__(self, root: Path, fingerprint: dict[str, Any]):
        self.fingerprint = fingerprint
        self.namespace = stable_hash(fingerprint)
        self.dir = Path(root) / "embeddings" / self.namespace
        self._index: dict[bytes, np.ndarray] | None = None

    def _load(self) -> dict[bytes, np.ndarray]:
        if self._index is None:
            self._index = {}
            for shard in sorted(self.dir.glob("*.npz")):
                try:
                    with np.load(shard, allow_pickle=False) as z:
                        for key, vec in zip(z["keys"], z["vectors"]):
                            self._index[bytes(key)] = vec
                except (OSError, ValueError, KeyError):
                    continue  # an unreadable shard is a miss, never a crash
        return self._index

    def get_many(self, text_hashes: list[str]) -> dict[str, np.ndarray]:
        index = self._load()
        found = {}
        for h in text_hashes:
            vec = index.get(h.encode("ascii"))
            if vec is not None:
                found[h] = vec
        return found

    def put_many(self, text_hashes: list[str], vectors: np.ndarray) -> None:
        if not text_hashes:
            return
        keys = np.array([h.encode("ascii") for h in text_hashes], dtype="S64")
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self.dir.mkdir(parents=True, exist_ok=True)
        key_file = self.dir / "key.json"
        if not key_file.exists():
            atomic_write_text(key_file, json.dumps(self.fingerprint, indent=2, sort_keys=True))
        import io

        buf = io.BytesIO()
        np.savez(buf, keys=keys, vectors=vectors)
        shard = hashlib.sha256(keys.tobytes()).hexdigest()[:20]
        atomic_write_bytes(self.dir / f"{shard}.npz", buf.getvalue())
        index = self._load()
        for key, vec in zip(keys, vectors):
            index[bytes(key)] = vec
