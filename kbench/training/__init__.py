"""Training kbench's own models: a cross-encoder reranker, and a relevance judge (a cross-encoder trained on a
generated set's pairs), since no trained one ships offline."""
from kbench.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".reranker": ["RerankerTrainingConfig", "train_reranker"],
    ".judge": ["JudgeTrainingConfig", "grade_of", "train_judge"],
})
