"""Training kbench's own models (a cross-encoder reranker), since no trained one ships offline."""
from kbench.training.reranker import RerankerTrainingConfig, train_reranker

__all__ = ["RerankerTrainingConfig", "train_reranker"]
