"""Retrieval: legs, fusion, rerank, grouping. Importing this package registers every strategy."""
from kbench.retrieval import vector  # noqa: F401
from kbench.retrieval import bm25, postgres_fts  # noqa: F401
from kbench.retrieval import fusion  # noqa: F401
from kbench.retrieval import pg_hybrid  # noqa: F401
from kbench.retrieval import rerank  # noqa: F401
from kbench.retrieval.registry import FUSIONS, LEGS, RERANKERS, SearchContext

__all__ = ["FUSIONS", "LEGS", "RERANKERS", "SearchContext"]
