"""Embedding: providers, the offline model catalogue and cached batch embedding.

Each provider is imported when its name is first used (``EMBEDDING_PROVIDERS``, embedding/registry.py)."""
