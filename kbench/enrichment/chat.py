"""An OpenAI-compatible chat endpoint and a response cache, shared by contextual enrichment and the llm reranker.

The endpoint is named by ``base_url`` (or OPENAI_BASE_URL) and ``model``; the key is read from the
environment variable named by ``api_key_env`` when the client is built and is held only by the client:
it is never part of a cache key, a config dump, a log line or an MLflow param.

Responses are cached under ``<workspace>/cache/llm/<namespace>/`` keyed by a hash of the exact prompt,
so a re-run (or a sweep sharing the workspace) never sends the same request twice. The namespace is a
hash of what else shapes a response (model, endpoint, max_tokens, temperature); ``key.json`` records it.
"""
from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from kbench.hashing import sha256_text, stable_hash
from kbench.errors import ConfigError
from kbench.cache import atomic_write_text


@dataclass(frozen=True)
class ChatSettings:
    """Where to send prompts. ``section`` names the config section, for error messages."""

    section: str
    base_url: str | None
    model: str | None
    api_key_env: str
    max_tokens: int = 200
    temperature: float | None = None  # None: the endpoint's default (production sets none)
    timeout_s: float = 60.0

    @property
    def endpoint(self) -> str | None:
        return self.base_url or os.environ.get("OPENAI_BASE_URL")

    def check(self) -> None:
        """Raise ConfigError naming every missing piece, before any work starts."""
        problems = []
        if not self.endpoint:
            problems.append(f"{self.section}.base_url: no OpenAI-compatible endpoint configured; set "
                            f"{self.section}.base_url (e.g. http://127.0.0.1:8000/v1) or OPENAI_BASE_URL")
        if not self.model:
            problems.append(f"{self.section}.model: no chat model configured; set {self.section}.model "
                            "(e.g. gpt-4o-mini, or the model your local server serves)")
        if not os.environ.get(self.api_key_env):
            problems.append(f"{self.section}.api_key_env: environment variable {self.api_key_env} is not set; export "
                            "it with your API key (any non-empty value for a local server that needs none)")
        if problems:
            raise ConfigError("\n".join(problems))

    def namespace(self) -> dict:
        return {"model": self.model, "endpoint": self.endpoint, "max_tokens": self.max_tokens,
                "temperature": self.temperature}


class ChatClient:
    """``complete(prompt) -> text`` through the endpoint's chat completions API."""

    def __init__(self, settings: ChatSettings):
        settings.check()
        from openai import OpenAI

        self.settings = settings
        self._client = OpenAI(base_url=settings.endpoint, api_key=os.environ[settings.api_key_env],
                              max_retries=2, timeout=settings.timeout_s)

    def __repr__(self) -> str:  # never show the client (it holds the key)
        return f"ChatClient(model={self.settings.model!r}, endpoint={self.settings.endpoint!r})"

    def complete(self, prompt: str) -> str:
        kwargs = {"temperature": self.settings.temperature} if self.settings.temperature is not None else {}
        response = self._client.chat.completions.create(
            model=self.settings.model, messages=[{"role": "user", "content": prompt}],
            max_tokens=self.settings.max_tokens, **kwargs,
        )
        return (response.choices[0].message.content or "").strip()


class ChatCache:
    """prompt -> response for one namespace; appended in small atomic shards, thread-safe."""

    def __init__(self, root: Path, namespace: dict, flush_every: int = 20):
        self.namespace = namespace
        self.dir = Path(root) / "llm" / stable_hash(namespace)
        self.flush_every = flush_every
        self._lock = threading.Lock()
        self._pending: dict[str, str] = {}
        self._entries: dict[str, str] = {}
        for shard in sorted(self.dir.glob("*.json")):
            if shard.name == "key.json":
                continue
            try:
                self._entries.update(json.loads(shard.read_text(encoding="utf-8")))
            except (OSError, ValueError):
                continue  # an unreadable shard is a miss, never a crash

    @staticmethod
    def key(prompt: str) -> str:
        return sha256_text(prompt)

    def get(self, prompt: str) -> str | None:
        return self._entries.get(self.key(prompt))

    def put(self, prompt: str, response: str) -> None:
        with self._lock:
            k = self.key(prompt)
            self._entries[k] = response
            self._pending[k] = response
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
            atomic_write_text(key_file, json.dumps(self.namespace, indent=2, sort_keys=True))
        blob = json.dumps(self._pending, sort_keys=True)
        atomic_write_text(self.dir / f"{sha256_text(blob)[:20]}.json", blob)
        self._pending = {}

    def __len__(self) -> int:
        return len(self._entries)
