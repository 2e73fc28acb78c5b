"""Store: FAISS indexes, the DuckDB mirror of production's schema, and pgvector for parity.

Importing this package registers every backend (kbench/store/backends)."""
from kbench.store.backends import duckdb, faiss, live, pgvector  # noqa: F401
