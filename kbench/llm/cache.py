"""Every answer the client receives, cached by (endpoint, model, hash of the prompt or text, parameters).

A namespace is the hash of ``{"kind", "base_url", "model", **parameters}`` (max_tokens, temperature, dimensions,
a stage's prompt template ...); ``key.json`` beside its shards records it. The base URL is part of it: one model
name at two endpoints is two models (a fine-tune served under a stock name, another provider's "gpt-4o-mini"),
and a cached answer is replayed only after the endpoint answered the client's check (``LLMClient.check_endpoint``),
so a dead endpoint stops a stage instead of replaying another's answers. Within a namespace the key is the
SHA-256 of the exact prompt (or text to embed).

Every answer is written as it arrives: one JSON line appended to this cache object's own log file
(``<host>-<pid>-<random>.jsonl``, opened on the first answer), so a killed run loses at most the answers
still in flight, and two processes never write one file. Older caches' JSON shards are read too. A line a
kill cut short, or an unreadable file, is a miss, never a crash. Thread-safe.
"""
from __future__ import annotations

import json
import os
import secrets
import threading
from pathlib import Path
from typing import Any

from kbench.cache import atomic_write_text, host_tag, shard_files
from kbench.hashing import sha256_text, stable_hash


class ResponseCache:
    def __init__(self, root: Path, namespace: dict[str, Any]):
        self.namespace = namespace
        self.dir = Path(root) / "llm" / stable_hash(namespace)
        self._lock = threading.Lock()
        self._entries: dict[str, Any] = {}
        self._log: Path | None = None  # this object's own append-only file, created with the first answer
        for shard in shard_files(self.dir, ".json"):  # shards of older kbench versions
            if shard.name == "key.json":
                continue
            try:
                self._entries.update(json.loads(shard.read_text(encoding="utf-8")))
            except (OSError, ValueError):
                continue
        for log in shard_files(self.dir, ".jsonl"):
            self._read_log(log)

    def _read_log(self, log: Path) -> None:
        try:
            lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return
        for line in lines:
            try:
                key, value = json.loads(line)
            except (ValueError, TypeError):
                continue  # the last line of a writer killed mid-write
            self._entries[key] = value

    @staticmethod
    def key(text: str) -> str:
        return sha256_text(text)

    def get(self, text: str) -> Any | None:
        return self._entries.get(self.key(text))

    def put(self, text: str, value: Any) -> None:
        """Keep the answer and append it to this cache's file at once (one ``write`` of one line)."""
        self.put_many([(text, value)])

    def put_many(self, items: list[tuple[str, Any]]) -> None:
        """Keep a batch's answers (an embeddings request's vectors) with one ``write``."""
        if not items:
            return
        keyed = [(self.key(text), value) for text, value in items]
        data = "".join(json.dumps([k, v]) + "\n" for k, v in keyed).encode("utf-8")
        with self._lock:
            self._entries.update(keyed)
            if self._log is None:
                self.dir.mkdir(parents=True, exist_ok=True)
                key_file = self.dir / "key.json"
                if not key_file.exists():
                    atomic_write_text(key_file, json.dumps(self.namespace, indent=2, sort_keys=True, default=str))
                self._log = self.dir / f"{host_tag()}-{os.getpid()}-{secrets.token_hex(4)}.jsonl"
            fd = os.open(self._log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                while data:  # in the kernel's hands on return: a kill of this process cannot lose it
                    data = data[os.write(fd, data):]
            finally:
                os.close(fd)

    def flush(self) -> None:
        """Nothing is held back (every ``put`` is written); kept for callers that flush at the end."""

    def __len__(self) -> int:
        return len(self._entries)
