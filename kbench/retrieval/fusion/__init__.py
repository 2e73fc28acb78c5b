"""Fusion methods, one module each; importing registers them."""
from kbench.retrieval.fusion import single  # noqa: F401
