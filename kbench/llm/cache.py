"""Every answer the client receives, cached by (model, hash of the prompt or text, parameters).

A namespace is the hash of ``{"kind", "model", **parameters}`` (max_tokens, temperature, dimensions, a
stage's prompt template ...); ``key.json`` beside its shards records it. The endpoint URL is not part of
it: the same model behind a restarted local server, or another port, answers from the cache, so a re-run
costs nothing. Within a namespace the key is the SHA-256 of the exact prompt (or text to embed).

Answers are appended in small JSON shards written atomically, so an interrupted run keeps what it
received; an unreadable shard is a miss, never a crash. Thread-safe.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from kbench.cache import atomic_write_text, shard_files
from kbench.hashing import sha256_text, stable_hash


class ResponseCache:
    def __init__(self, root: Path, namespace: dict[str, Any], flush_every: int = 20):
        self.namespace = namespace
        self.dir = Path(root) / "llm" / stable_hash(namespace)
        self.flush_every = flush_every
        self._lock = threading.Lock()
        self._pending: dict[str, Any] = {}
        self._entries: dict[str, Any] = {}
        for shard in shard_files(self.dir, ".json"):
            if shard.name == "key.json":
                continue
            try:
                self._entries.update(json.loads(shard.read_text(encoding="utf-8")))
            except (OSError, ValueError):
                continue

    @staticmethod
    def key(text: str) -> str:
        return sha256_text(text)

    def get(self, text: str) -> Any | None:
        return self._entries.get(self.key(text))

    def put(self, text: str, value: Any) -> None:
        with self._lock:
            k = self.key(text)
            self._entries[k] = value
            self._pending[k] = value
            if len(self._pending) >= self.flush_every:
                self._flush_locked()

    def flush(self) -> None:
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        if not self._pending:
            return
        key_file = self.dir / "key.json"
        if not key_file.exists():
            atomic_write_text(key_file, json.dumps(self.namespace, indent=2, sort_keys=True, default=str))
        blob = json.dumps(self._pending, sort_keys=True)
        atomic_write_text(self.dir / f"{sha256_text(blob)[:20]}.json", blob)
        self._pending = {}

    def __len__(self) -> int:
        return len(self._entries)
