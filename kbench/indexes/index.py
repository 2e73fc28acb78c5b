"""The records of the index stage: what a leg asks for (``IndexSpec``), what one is built from (``IndexSections``,
``Units``) and what it is (``Index``).

An **index** is one list of units a leg searches, with what searches them: the run's chunks (index ``chunk``),
whole documents, the code-example index, a leg's own chunking, any other unit kind, or a live store's rows. Every index is
built by ``kbench.indexes.build.build_index`` and handed to retrieval as this one record.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from kbench.chunking.config import ChunkingConfig
from kbench.datasets.config import DatasetConfig
from kbench.embedding.config import EmbeddingConfig
from kbench.enrichment.config import EnrichmentConfig
from kbench.llm.config import LLMPolicy
from kbench.llm.usage import UsageMeter
from kbench.records import Chunk
from kbench.store.config import StoreConfig
from kbench.trace import StageTimer

if TYPE_CHECKING:  # annotations only: a config names IndexSpec long before anything is embedded or stored
    import numpy as np

    from kbench.embedding.stage import EmbeddingResult
    from kbench.store.outcome import StoreHandle, VectorSearch

CHUNK = "chunk"  # the name of the run's own index: its chunking of the dataset


@dataclass(frozen=True)
class IndexSpec:
    """What one or more legs ask for: an index by ``name`` (the label its units' ids carry, ``doc#<name>:<n>``;
    ``chunk`` for the run's chunks, whose ids carry none), the ``kind`` that makes its units (a key of
    ``UNIT_KINDS``), the chunking it runs when the kind chunks, and whether a leg on it reads vectors."""

    name: str
    kind: str
    chunking: ChunkingConfig | None = None
    embed: bool = False


@dataclass(frozen=True)
class IndexSections:
    """The config sections an index is built from, typed; never the whole experiment."""

    dataset: DatasetConfig  # identity of the corpus: names the store's collection
    chunking: ChunkingConfig  # the run's chunking (index ``chunk``)
    enrichment: EnrichmentConfig  # contextual text of the run's chunks; the code-example index's knobs
    embedding: EmbeddingConfig
    store: StoreConfig  # where the run's chunk vectors are kept; the index type of every vector index
    llm_policy: LLMPolicy = field(default_factory=LLMPolicy)


@dataclass
class BuildLog:
    """Where a build reports: seconds per stage, counts (``count_*`` in MLflow) and LLM usage."""

    timer: StageTimer = field(default_factory=StageTimer)
    counts: dict[str, int] = field(default_factory=dict)
    meter: UsageMeter = field(default_factory=UsageMeter)


@dataclass(frozen=True)
class Units:
    """What a unit kind makes: the units and, row for row, the text to embed for each (their text when None)."""

    units: list[Chunk]
    texts: list[str] | None = None

    def embed_texts(self) -> list[str]:
        return self.texts if self.texts is not None else [u.text for u in self.units]


@dataclass(frozen=True)
class Index:
    """One searchable list of units: row i of ``vectors`` and of the vector index is ``units[i]``.

    ``made_by`` says what made it (the unit kind and its chunking, the encoder's cache fingerprint or the stored
    rows' model); ``store`` is the production-shaped store it lives in (duckdb, pgvector, live), when any."""

    name: str
    units: list[Chunk]
    embedded: EmbeddingResult | None = None  # vectors (L2-normalized; failed rows are zeros), failures, cache counts
    vector_index: VectorSearch | None = None
    store: StoreHandle | None = None
    made_by: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)  # the store's index recall, when checked
    close: Callable[[], None] = lambda: None

    @property
    def vectors(self) -> np.ndarray | None:
        return self.embedded.vectors if self.embedded is not None else None
