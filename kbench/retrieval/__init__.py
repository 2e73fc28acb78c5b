"""Retrieval: legs, fusion, rerank, grouping; each strategy imported when its name is first used (registry.py)."""
from kbench.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {".registry": ["FUSIONS", "LEGS", "RERANKERS", "SearchContext"]})
