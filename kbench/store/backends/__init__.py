"""Store backends, one module each, registered in ``kbench.store.registry.STORE_BACKENDS``."""
