"""Chunkers, one module per strategy, each imported when its name is first used (CHUNKERS, chunking/registry.py)."""
from kbench.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".registry": ["CHUNKERS"],
    ".stage": ["chunk_corpus", "chunk_dataset", "chunked_dataset"],
})
