"""Unit kinds, one module each, registered in ``kbench.indexes.registry.UNIT_KINDS`` (imported on first use)."""
