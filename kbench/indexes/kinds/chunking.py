"""Units made by a chunker: a leg's own chunking (``unit: markdown``, ``unit: {strategy: fixed, chunk_size: 400}``)
and ``document``, one unit per document (exactly the ``none`` chunker's output, so a leg on ``document`` equals
that leg run with ``chunking: none``). Built through the chunk cache; timed as stage ``units``."""
from __future__ import annotations

from functools import cache
from pathlib import Path

from kbench import chunking
from kbench.chunking.config import ChunkingConfig
from kbench.indexes.index import BuildLog, IndexSections, IndexSpec, Units
from kbench.indexes.registry import UNIT_KINDS, UnitKind
from kbench.records import Dataset


@cache
def document_chunking() -> ChunkingConfig:
    """The ``none`` chunker's section: one unit per document. Made on first use: a section made when the module is
    imported would build pydantic's validators (and look for its plugins) whenever a config is merely read."""
    return ChunkingConfig(strategy="none")


@UNIT_KINDS.register("chunking")
class ChunkingUnits(UnitKind):
    """A chunking of the dataset of the leg's own (a chunker name or a chunking section)."""

    chunks = True

    def build(self, spec: IndexSpec, dataset: Dataset, sections: IndexSections, log: BuildLog,
              cache_root: Path) -> Units:
        counts: dict[str, int] = {}
        with log.timer.stage("units"):
            units = chunking.chunk_dataset(dataset, spec.chunking or document_chunking(), cache_dir=cache_root,
                                           counts=counts)
        log.counts.update({f"units_{spec.name}_{k}": v for k, v in counts.items()})
        return Units(units)


@UNIT_KINDS.register("document")
class DocumentUnits(ChunkingUnits):
    """One unit per document, the whole of its text (the ``none`` chunker)."""
