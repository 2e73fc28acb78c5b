"""Fusion methods, one module each; importing registers them."""
from kbench.retrieval.fusion import (archon_hybrid, archon_weighted, rrf, rrf_supabase, single,  # noqa: F401
                                     weighted)
