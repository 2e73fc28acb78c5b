"""Score normalizations for score-based fusion, one module each (ranx's style: ``<name>_norm.py``).

Each is a pure function from one leg's scores (best first, as the leg returned them) to normalized
scores in the same order. Every one computes over the list it is given, i.e. the leg's returned top-k,
not over the whole corpus.
"""
from __future__ import annotations

from typing import Literal

from kbench.lazy import lazy_exports

# the names, known without numpy (`kbench list`); each method's function in methods.py
Normalization = Literal["none", "min-max", "z-score", "rank", "dbsf"]

__getattr__, __dir__, _ = lazy_exports(__name__, {".methods": ["HUGE", "NORMALIZATIONS", "normalize", "tame_range"]})
__all__ = ["NORMALIZATIONS", "Normalization", "normalize"]
