"""Training kbench's own models (a cross-encoder reranker), since no trained one ships offline."""
from kbench.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {".reranker": ["RerankerTrainingConfig", "train_reranker"]})
