"""Chunkers, one module per strategy. Importing this package registers them all."""
from kbench.chunking import fixed, none  # noqa: F401
from kbench.chunking.registry import CHUNKERS
from kbench.chunking.run import chunk_corpus

__all__ = ["CHUNKERS", "chunk_corpus"]
