"""Retrieval: legs, fusion, rerank, grouping. Importing this package registers every strategy."""
from kbench.retrieval import fusion, legs, rerank  # noqa: F401
from kbench.retrieval.registry import FUSIONS, LEGS, RERANKERS, SearchContext

__all__ = ["FUSIONS", "LEGS", "RERANKERS", "SearchContext"]
