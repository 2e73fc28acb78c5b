"""Chunkers, one module per strategy. Importing this package registers them all."""
from kbench.chunking import (ast, by_type, endpoint, fixed, fixed_tokens, markdown, none,  # noqa: F401
                             paragraph, recursive, smart)
from kbench.chunking.registry import CHUNKERS
from kbench.chunking.stage import chunk_corpus, chunk_dataset, chunked_dataset

__all__ = ["CHUNKERS", "chunk_corpus", "chunk_dataset", "chunked_dataset"]
