"""Fusion methods, one module each, registered in ``kbench.retrieval.registry.FUSIONS`` (imported on first use)."""
