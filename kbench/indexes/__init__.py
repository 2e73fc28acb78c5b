"""Indexes: the units a leg searches and what searches them, built one way for every kind (kbench/indexes/build.py).

Importing this package registers every unit kind (kbench/indexes/kinds)."""
from kbench.indexes import kinds  # noqa: F401
from kbench.indexes.build import build_index, build_indexes, close_all, stored_index
from kbench.indexes.index import CHUNK, BuildLog, Index, IndexSections, IndexSpec, Units
from kbench.indexes.registry import UNIT_KINDS, UnitKind
from kbench.indexes.spec import unit_key, unit_kind, unit_label, unit_names

__all__ = ["CHUNK", "UNIT_KINDS", "BuildLog", "Index", "IndexSections", "IndexSpec", "UnitKind", "Units",
           "build_index", "build_indexes", "close_all", "stored_index", "unit_key", "unit_kind", "unit_label",
           "unit_names"]
