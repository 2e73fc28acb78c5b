"""Embedding: providers, the offline model catalogue and cached batch embedding.

Each provider is imported when its name is first used (``EMBEDDING_PROVIDERS``, embedding/registry.py)."""
from kbench.lazy import lazy_exports

# a module of the package is imported when first named (``embedding.choice``): the CLI's tables name it at start-up
__getattr__, __dir__, _ = lazy_exports(__name__, {})
