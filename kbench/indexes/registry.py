"""Unit kinds by name: what a leg's ``unit`` may name besides ``chunk`` and a chunking.

A unit kind makes the units of an index from the dataset's documents. It subclasses ``UnitKind`` in its own
module under ``kbench/indexes/kinds/`` and registers there, and ``UNIT_KINDS`` below names that module, imported when
the kind is first used. That is the whole of adding one: a leg then searches it with ``retrieval.leg_params.<leg>.unit: <name>``, its units are embedded
through the embedding cache when a leg on them reads vectors, and fusion across units, offsets and span metrics
work on them as on any unit (their ``start``/``end`` must index into their document's text).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from kbench.registry import Registry

if TYPE_CHECKING:  # annotations only: `kbench list` reads UNIT_KINDS without the index records' config sections
    from kbench.indexes.index import BuildLog, Index, IndexSections, IndexSpec, Units
    from kbench.records import Dataset


class UnitKind(ABC):
    """Makes the units of one index. ``chunks``: whether a chunking section (``IndexSpec.chunking``) says how."""

    chunks: ClassVar[bool] = False

    @abstractmethod
    def build(self, spec: IndexSpec, dataset: Dataset, sections: IndexSections, log: BuildLog,
              cache_root: Path) -> Units:
        """The units (``doc_id``, offsets into the document's text, the text a keyword leg reads) and what to embed
        for each; counts go to ``log.counts`` as ``units_<spec.name>_<counter>``."""

    def mirror(self, index: Index, dataset: Dataset, sections: IndexSections, log: BuildLog,
               workspace: Path) -> None:
        """After embedding: also write the index where production keeps it (timed and counted in ``log``); by
        default nowhere."""


UNIT_KINDS: Registry[type[UnitKind]] = Registry("retrieval.leg_params.<leg>.unit", {
    "chunking": "kbench.indexes.kinds.chunking",
    "code_example": "kbench.indexes.kinds.code_example",
    "document": "kbench.indexes.kinds.chunking",
    "heading": "kbench.indexes.kinds.heading",
})
