"""Tracking: the run folder, MLflow logging, tag names, reading runs back, TREC/ranx formats.

Kept free of imports: ``kbench.config`` imports ``kbench.tracking.config`` (the section model), which runs
this file first. A module of the package is imported when first named (``tracking.read``: kbench/lazy.py).
"""
from kbench.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {})
