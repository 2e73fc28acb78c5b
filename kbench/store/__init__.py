"""Store: caches, FAISS indexes, the DuckDB mirror of production's schema, and pgvector for parity."""
