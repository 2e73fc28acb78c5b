"""First-stage legs, one module each, registered in ``kbench.retrieval.registry.LEGS`` (imported on first use)."""
