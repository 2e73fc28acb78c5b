"""kbench: a workbench for measuring every stage of a RAG knowledge-base pipeline."""
import os

# Nothing is fetched at run time: models load from local folders only. Set before any HF import.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")

__version__ = "0.1.0"
