"""Sweeps: expand a config's grid and variants, run them locally or on Dask, resume after a kill."""
from kbench.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".expand": ["SweepConfig", "SweepPlan", "expand_sweep", "load_sweep"],
    ".executors": ["DaskExecutor", "LocalExecutor", "make_executor"],
    ".run": ["SweepError", "SweepOutcome", "run_sweep"],
})
