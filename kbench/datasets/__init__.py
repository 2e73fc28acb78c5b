"""Datasets: loaders per layout (BEIR, spans) and the registry of names."""
from kbench.datasets.beir import DatasetError
from kbench.datasets.registry import DATASETS, load_dataset, read_dataset

__all__ = ["DATASETS", "DatasetError", "load_dataset", "read_dataset"]
