"""The content hashes kbench keys caches, runs and sweeps by (one place, so equal data hashes equally)."""
from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any


def sha256_text(text: str) -> str:
    """Hex SHA-256 of a text's UTF-8 bytes (document and chunk content hashes)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_bytes(data: bytes, length: int = 64) -> str:
    return hashlib.sha256(data).hexdigest()[:length]


def stable_hash(data: Any, length: int = 16) -> str:
    """Hash of plain data as canonical JSON (sorted keys, no spaces): equal data, equal hash."""
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:length]


# folders a dataset may sit beside that never hold its documents, questions or judgements
SKIPPED_FOLDERS = frozenset({".git", "node_modules", "__pycache__", ".ipynb_checkpoints", ".pytest_cache"})


@functools.lru_cache(maxsize=4096)
def _file_sha256(path: str, size: int, mtime_ns: int) -> str:
    # keyed by size and mtime as well as the path: an edited file is read again, an untouched one once
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes, read once per process while its size and mtime stay the same."""
    stat = Path(path).stat()
    return _file_sha256(str(path), stat.st_size, stat.st_mtime_ns)


def folder_content_hash(folder: Path, length: int = 16) -> str:
    """Hash of every file under ``folder`` (relative path and bytes, in path order): any edit, addition,
    removal or rename of a file changes it. Version-control and cache folders are left out."""
    folder = Path(folder)
    h = hashlib.sha256()
    files = sorted(p for p in folder.rglob("*")
                   if p.is_file() and not SKIPPED_FOLDERS & set(p.relative_to(folder).parts[:-1]))
    for path in files:
        stat = path.stat()
        h.update(path.relative_to(folder).as_posix().encode("utf-8") + b"\0")
        h.update(_file_sha256(str(path), stat.st_size, stat.st_mtime_ns).encode("ascii") + b"\n")
    return h.hexdigest()[:length]
