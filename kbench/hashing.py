"""The content hashes kbench keys caches, runs and sweeps by (one place, so equal data hashes equally)."""
from __future__ import annotations

import hashlib
import json
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
