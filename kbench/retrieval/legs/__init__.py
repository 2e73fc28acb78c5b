"""First-stage legs, one module each; importing registers them."""
from kbench.retrieval.legs import bm25, code_examples, pg_hybrid, postgres_fts, vector  # noqa: F401
