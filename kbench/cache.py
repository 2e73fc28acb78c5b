"""Content-addressed caches shared by every run and sweep in a workspace.

Embeddings live under ``cache/embeddings/<namespace>/``: the namespace is a hash of everything that
changes a vector (model id and revision, dimension, normalization, prefixes, enrichment prompt), and
``key.json`` beside the shards records those fields, so a namespace can be read back to its config.
Each write is one shard, ``<hash>.npz`` with text hashes (fixed-width bytes, no pickle) and float32
vectors, written to a temporary file and renamed into place, so a crash never leaves a half shard.

Chunks live under ``cache/chunks/<namespace>/``: the namespace hashes the chunker's name, its resolved
params and the source of its module (so editing a chunker never serves stale chunks); a shard is JSON
mapping a document key (hash of the text and what chunkers read besides it) to that document's chunks.

A shard's modification time is refreshed whenever it serves a hit, so ``kbench cache clear
--older-than 7d`` removes what no run has written or read for a week.
"""
from __future__ import annotations

import hashlib
import inspect
import io
import json
import os
import shutil
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from kbench.hashing import stable_hash


TMP_PREFIX = ".tmp-"  # + host tag + "-" + the writer's pid + "-" + random: who may be writing it
STALE_TEMP_SECONDS = 3600  # a write is one buffer and an fsync: a temp file this old has no live writer


def host_tag() -> str:
    """8 hex digits naming this machine in temp file names (workers on other hosts may share the cache)."""
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def _writer_temp(path: Path) -> tuple[int, str]:
    path.parent.mkdir(parents=True, exist_ok=True)
    return tempfile.mkstemp(dir=path.parent, prefix=f"{TMP_PREFIX}{host_tag()}-{os.getpid()}-", suffix=path.suffix)


def atomic_write_file(path: Path, write: Callable[[Path], None]) -> None:
    """Write ``path`` whole or not at all through ``write(temp_path)``, for a library that writes by file name
    (FAISS): the temp file is named after its writer like ``atomic_write_bytes``'s, so a killed writer's one
    is swept (``remove_abandoned_temps``), and renamed into place once ``write`` returns."""
    fd, tmp = _writer_temp(path)
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all: a temp file named after its writer, fsynced, renamed into place."""
    fd, tmp = _writer_temp(path)
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


def abandoned_temp(path: Path, now: float | None = None) -> bool:
    """A temp file no live process is writing: its writer (on this host) is gone, or it is over an hour old.

    A kill -9 between the temp file and the rename leaves one; a live writer's file is never touched, also
    when it runs on another host (its pid cannot be checked from here: only the age counts).
    """
    if not path.name.startswith(TMP_PREFIX):
        return False
    try:
        age = (time.time() if now is None else now) - path.stat().st_mtime
    except FileNotFoundError:
        return False
    if age > STALE_TEMP_SECONDS:
        return True
    host, _, rest = path.name[len(TMP_PREFIX):].partition("-")
    pid = rest.partition("-")[0]
    return host == host_tag() and pid.isdigit() and not pid_alive(int(pid))


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def remove_abandoned_temps(folder: Path) -> int:
    """Delete the temp files of ``folder`` that a killed writer left (``abandoned_temp``); how many."""
    removed = 0
    for path in folder.glob(f"{TMP_PREFIX}*") if folder.is_dir() else ():
        if abandoned_temp(path):
            path.unlink(missing_ok=True)
            removed += 1
    return removed


def shard_files(folder: Path, suffix: str) -> list[Path]:
    """Finished shards only: pathlib's glob also matches dot-files, so in-flight temp files are skipped. Listing
    a folder to read it also removes the temp files killed writers left there (never a live writer's)."""
    remove_abandoned_temps(folder)
    return sorted(p for p in folder.glob(f"*{suffix}") if not p.name.startswith(TMP_PREFIX))


def touch_files(paths: Iterable[Path]) -> None:
    """Mark shards as used now (what ``cache clear --older-than`` measures); a vanished file is fine."""
    now = time.time()
    for path in paths:
        try:
            os.utime(path, (now, now))
        except OSError:
            pass


class EmbeddingCache:
    """text sha256 -> vector, for one namespace (one model/dimension/normalization/prompt)."""

    def __init__(self, root: Path, fingerprint: dict[str, Any]):
        self.fingerprint = fingerprint
        self.namespace = stable_hash(fingerprint)
        self.dir = Path(root) / "embeddings" / self.namespace
        self._index: dict[bytes, np.ndarray] | None = None
        self._shard_of: dict[bytes, Path] = {}

    def _load(self) -> dict[bytes, np.ndarray]:
        if self._index is None:
            self._index = {}
            for shard in shard_files(self.dir, ".npz"):
                try:
                    with np.load(shard, allow_pickle=False) as z:
                        keys, vectors = z["keys"], z["vectors"]
                except Exception:  # noqa: BLE001 - an unreadable shard is a miss, never a crash
                    continue
                for key, vec in zip(keys, vectors):
                    self._index[bytes(key)] = vec
                    self._shard_of[bytes(key)] = shard
        return self._index

    def get_many(self, text_hashes: list[str]) -> dict[str, np.ndarray]:
        index = self._load()
        found = {}
        used: set[Path] = set()
        for h in text_hashes:
            key = h.encode("ascii")
            vec = index.get(key)
            if vec is not None:
                found[h] = vec
                if key in self._shard_of:
                    used.add(self._shard_of[key])
        touch_files(used)
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
        buf = io.BytesIO()
        np.savez(buf, keys=keys, vectors=vectors)
        shard = self.dir / f"{hashlib.sha256(keys.tobytes()).hexdigest()[:20]}.npz"
        atomic_write_bytes(shard, buf.getvalue())
        index = self._load()
        for key, vec in zip(keys, vectors):
            index[bytes(key)] = vec
            self._shard_of[bytes(key)] = shard


# --------------------------------------------------------------------------- chunks
def document_key(document) -> str:
    """What a chunker reads from a document: its text plus title, type and path (code chunkers use the
    extension, ``none`` prepends the title). Two documents with equal keys always chunk the same."""
    return stable_hash([document.text, document.title, document.doc_type, document.url], length=32)


def chunker_fingerprint(name: str, impl: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Chunker name, resolved params and a hash of the source of the package that implements it.

    The whole package (every .py under the chunker module's folder) counts, because chunkers share
    helpers and the metadata step: editing any of them must not serve chunks made by the old code.
    """
    digest = hashlib.sha256()
    try:
        package = Path(inspect.getsourcefile(impl) or "").resolve().parent
        for path in sorted(package.rglob("*.py")):
            digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
    except (OSError, TypeError):
        digest.update(repr(impl).encode())
    return {"chunker": name, "params": params, "code": digest.hexdigest()[:12]}


class ChunkCache:
    """(document key, chunker fingerprint) -> that document's chunks, as JSON shards.

    Counts ``hits`` and ``misses`` (documents) for the run's stage metrics.
    """

    def __init__(self, root: Path, fingerprint: dict[str, Any]):
        self.fingerprint = fingerprint
        self.namespace = stable_hash(fingerprint)
        self.dir = Path(root) / "chunks" / self.namespace
        self._index: dict[str, list[dict[str, Any]]] | None = None
        self._shard_of: dict[str, Path] = {}
        self._used: set[Path] = set()
        self.hits = 0
        self.misses = 0

    def _load(self) -> dict[str, list[dict[str, Any]]]:
        if self._index is None:
            self._index = {}
            for shard in shard_files(self.dir, ".json"):
                if shard.name == "key.json":
                    continue
                try:
                    entries = json.loads(shard.read_text(encoding="utf-8"))["documents"]
                except Exception:  # noqa: BLE001 - unreadable shard: a miss, never a crash
                    continue
                for key, chunks in entries.items():
                    self._index[key] = chunks
                    self._shard_of[key] = shard
        return self._index

    def get(self, key: str) -> list[dict[str, Any]] | None:
        chunks = self._load().get(key)
        if chunks is None:
            self.misses += 1
        else:
            self.hits += 1
            if key in self._shard_of:
                self._used.add(self._shard_of[key])
        return chunks

    def put_many(self, entries: dict[str, list[dict[str, Any]]]) -> None:
        """Write one shard holding ``entries``; documents whose chunks are not JSON-able are left out."""
        clean: dict[str, list[dict[str, Any]]] = {}
        for key, chunks in entries.items():
            try:
                json.dumps(chunks)
            except (TypeError, ValueError):
                continue  # a chunker put something non-JSON in metadata: recompute next time
            clean[key] = chunks
        if not clean:
            return
        key_file = self.dir / "key.json"
        if not key_file.exists():
            atomic_write_text(key_file, json.dumps(self.fingerprint, indent=2, sort_keys=True, default=str))
        blob = json.dumps({"documents": clean}, sort_keys=True, separators=(",", ":"))
        shard = self.dir / f"{hashlib.sha256(blob.encode()).hexdigest()[:20]}.json"
        atomic_write_text(shard, blob)
        index = self._load()
        for key, chunks in clean.items():
            index[key] = chunks
            self._shard_of[key] = shard

    def flush_usage(self) -> None:
        touch_files(self._used)
        self._used.clear()


# --------------------------------------------------------------------------- stats and clearing
CACHE_KINDS = {"embeddings": ".npz", "chunks": ".json"}


@dataclass
class NamespaceStats:
    kind: str  # embeddings | chunks
    namespace: str
    label: str  # model or chunker, read from key.json
    entries: int  # vectors or documents
    shards: int
    bytes: int
    newest: float  # mtime of the most recently written or used shard (epoch seconds)
    oldest: float


def _count_entries(kind: str, shard: Path) -> int:
    try:
        if kind == "embeddings":
            with np.load(shard, allow_pickle=False) as z:
                return int(len(z["keys"]))
        return len(json.loads(shard.read_text(encoding="utf-8"))["documents"])
    except Exception:  # noqa: BLE001
        return 0


def cache_stats(root: Path) -> list[NamespaceStats]:
    """One row per cache namespace under ``root`` (a workspace's cache/ folder)."""
    rows = []
    for kind, suffix in CACHE_KINDS.items():
        base = Path(root) / kind
        if not base.is_dir():
            continue
        for folder in sorted(p for p in base.iterdir() if p.is_dir()):
            shards = [p for p in shard_files(folder, suffix) if p.name != "key.json"]
            try:
                key = json.loads((folder / "key.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                key = {}
            if kind == "embeddings":
                label = (f"{key.get('model', '?')} rev {key.get('revision', '?')} "
                         f"dim={key.get('dimension') or 'native'}")
            else:
                label = f"{key.get('chunker', '?')} {json.dumps(key.get('params', {}), sort_keys=True)}"
            mtimes = [p.stat().st_mtime for p in shards] or [0.0]
            rows.append(NamespaceStats(
                kind, folder.name, label, sum(_count_entries(kind, p) for p in shards), len(shards),
                sum(p.stat().st_size for p in folder.iterdir() if p.is_file()), max(mtimes), min(mtimes),
            ))
    return rows


@dataclass
class ClearResult:
    files: int = 0
    bytes: int = 0


def clear_cache(root: Path, older_than_seconds: float | None = None, now: float | None = None) -> ClearResult:
    """Delete cache shards (all, or those not written or used for ``older_than_seconds``).

    Temp files a killed write left are removed too (``abandoned_temp``: writer gone or over an hour old), never a
    live writer's; a namespace folder with no shard left is removed with its key.json.
    """
    now = time.time() if now is None else now
    result = ClearResult()
    for kind, suffix in CACHE_KINDS.items():
        base = Path(root) / kind
        if not base.is_dir():
            continue
        for folder in [p for p in base.iterdir() if p.is_dir()]:
            for path in folder.iterdir():
                if not path.is_file() or path.name == "key.json":
                    continue
                if path.name.startswith(TMP_PREFIX):
                    if not abandoned_temp(path, now):
                        continue  # a live writer's: its shard appears in a moment
                    age = None
                else:
                    age = now - path.stat().st_mtime
                if age is None or older_than_seconds is None or age > older_than_seconds:
                    result.bytes += path.stat().st_size
                    result.files += 1
                    path.unlink(missing_ok=True)
            if not any(p.suffix == suffix and p.name != "key.json" for p in folder.iterdir()):
                shutil.rmtree(folder, ignore_errors=True)
    return result


def parse_age(text: str) -> float:
    """``90s``, ``30m``, ``12h``, ``7d``, ``2w`` -> seconds."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
    text = text.strip().lower()
    if len(text) < 2 or text[-1] not in units:
        raise ValueError(f"--older-than: {text!r} is not an age; use a number and a unit s/m/h/d/w, e.g. 7d")
    try:
        value = float(text[:-1])
    except ValueError:
        raise ValueError(f"--older-than: {text!r} is not an age; use a number and a unit s/m/h/d/w, e.g. 7d") from None
    if value < 0:
        raise ValueError(f"--older-than: {text!r} is negative")
    return value * units[text[-1]]
