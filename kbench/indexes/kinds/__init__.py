"""Unit kinds, one module each; importing this package registers them (kbench/indexes/registry.py)."""
from kbench.indexes.kinds import chunking, code_example, heading  # noqa: F401
