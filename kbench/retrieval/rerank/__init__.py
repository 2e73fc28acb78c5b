"""Rerankers, one module each, registered in ``kbench.retrieval.registry.RERANKERS`` (imported on first use).
``check_reranker`` runs their start-time checks."""
from kbench.retrieval.config import RerankConfig
from kbench.retrieval.registry import RERANKERS


def check_reranker(config: RerankConfig) -> list:
    """Fail before any work when an enabled reranker cannot run (model missing, endpoint unconfigured); the
    LLM endpoints it will call (for ``llm.check_reachable``)."""
    if not config.enabled:
        return []
    return RERANKERS.get(config.strategy).impl.preflight(config.params) or []
