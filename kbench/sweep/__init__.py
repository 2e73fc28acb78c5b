"""Sweeps: expand a config's grid and variants, run them locally or on Dask, resume after a kill."""
from kbench.sweep.expand import SweepConfig, SweepPlan, expand_sweep, load_sweep
from kbench.sweep.executors import DaskExecutor, LocalExecutor, make_executor
from kbench.sweep.run import SweepError, SweepOutcome, run_sweep

__all__ = ["DaskExecutor", "LocalExecutor", "SweepConfig", "SweepError", "SweepOutcome", "SweepPlan", "expand_sweep",
           "load_sweep", "make_executor", "run_sweep"]
