"""Datasets: loaders per layout (BEIR, spans) and the registry of names."""
from kbench.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".beir": ["DatasetError"],
    ".registry": ["DATASETS", "load_dataset", "read_dataset", "unlabelled_questions"],
})
