"""Embedding: providers, the offline model catalogue and cached batch embedding.

Importing this package registers every provider."""
from kbench.embedding import openai_compat, sentence_transformers, static  # noqa: F401
