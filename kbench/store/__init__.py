"""Store: FAISS indexes, the DuckDB mirror of production's schema, and pgvector for parity.

Each backend (kbench/store/backends) is imported when its name is first used (``store/registry.py``), and each
module of the package when first named (``store.live_store``: kbench/lazy.py)."""
from kbench.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {})
