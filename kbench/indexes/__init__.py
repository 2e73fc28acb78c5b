"""Indexes: the units a leg searches and what searches them, built one way for every kind (kbench/indexes/build.py).

Each unit kind (kbench/indexes/kinds) is imported when its name is first used (``UNIT_KINDS``, indexes/registry.py)."""
from kbench.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".build": ["build_index", "build_indexes", "close_all", "stored_index"],
    ".index": ["CHUNK", "BuildLog", "Index", "IndexSections", "IndexSpec", "Units"],
    ".registry": ["UNIT_KINDS", "UnitKind"],
    ".spec": ["unit_key", "unit_kind", "unit_label", "unit_names"],
})
