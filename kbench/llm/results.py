"""What a batch of requests returns: successes and detailed failures apart (Archon's
EmbeddingBatchResult). A failed text never gets a placeholder: no zero vector, no empty answer."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Failure:
    index: int  # position in the caller's list
    text: str
    error: str  # what went wrong, after how many attempts (never the key)
    attempts: int = 0  # requests sent for it (0: never attempted, the run had stopped)


@dataclass
class ChatBatchResult:
    answers: dict[int, str] = field(default_factory=dict)  # index -> answer, successes only
    failed_items: list[Failure] = field(default_factory=list)
    stopped: str | None = None  # why the batch stopped early (quota, unreachable endpoint, refused key)
    cache_hits: int = 0
    unusable: list[int] = field(default_factory=list)  # answers the caller's ``usable`` test refused (sorted)
    stopped_unusable: bool = False  # stopped early: too many unusable or failed answers to meet the floor

    @property
    def success_count(self) -> int:
        return len(self.answers)

    @property
    def failure_count(self) -> int:
        return len(self.failed_items)


@dataclass
class EmbeddingBatchResult:
    """``embeddings[i]`` is the vector of ``texts[indices[i]]``; failed texts are only in ``failed_items``."""

    embeddings: list[np.ndarray] = field(default_factory=list)
    indices: list[int] = field(default_factory=list)
    texts_processed: list[str] = field(default_factory=list)  # the successful texts, in ``indices`` order
    failed_items: list[Failure] = field(default_factory=list)
    stopped: str | None = None
    cache_hits: int = 0

    @property
    def success_count(self) -> int:
        return len(self.embeddings)

    @property
    def failure_count(self) -> int:
        return len(self.failed_items)

    def by_index(self) -> dict[int, np.ndarray]:
        return dict(zip(self.indices, self.embeddings))
