"""Experiment: one config file, composed of the section models each stage owns, and the one YAML loader.

A config file describes one experiment. Each stage package owns its section (``chunking/config.py``,
``retrieval/config.py``, ...); strategy knobs (a chunker's sizes, a fusion's weights, a reranker's model)
sit beside the strategy name and are validated against the params model the strategy registered, so
``chunking: {strategy: smart, chunk_size: 600}`` is checked by the smart chunker's own model and the
resolved config lists every knob with its default filled in.

Every error names the field path, the bad value and what is allowed, and nothing is run or written
before the whole config validates.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError

from kbench.chunking.config import ChunkingConfig
from kbench.datasets.config import DatasetConfig
from kbench.dotted import set_dotted
from kbench.embedding.config import EmbeddingConfig
from kbench.enrichment.config import EnrichmentConfig
from kbench.errors import ConfigError, format_error
from kbench.evaluation.config import EvaluationConfig, OverlapRule
from kbench.hashing import stable_hash
from kbench.registry import StrictModel
from kbench.retrieval.config import FilterConfig, FusionConfig, GroupingConfig, RerankConfig, RetrievalConfig
from kbench.store.config import StoreConfig
from kbench.tracking.config import TrackingConfig

__all__ = [  # the sections are re-exported so a notebook can build any of them from one import
    "ChunkingConfig", "ConfigError", "DatasetConfig", "EmbeddingConfig", "EnrichmentConfig", "EvaluationConfig",
    "Experiment", "FilterConfig", "FusionConfig", "GroupingConfig", "OverlapRule", "RerankConfig",
    "RetrievalConfig", "StoreConfig", "TrackingConfig", "apply_set_items", "load_experiment", "parse_override",
    "read_yaml_mapping", "set_dotted", "validate_experiment",
]


class Experiment(StrictModel):
    name: str = "experiment"
    description: str = ""
    workspace: str = Field("experiments", description="folder for mlflow.db, mlruns/, cache/, stores/")
    dataset: DatasetConfig
    chunking: ChunkingConfig = Field(default_factory=ChunkingConfig)
    enrichment: EnrichmentConfig = Field(default_factory=EnrichmentConfig)
    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    rerank: RerankConfig = Field(default_factory=RerankConfig)
    evaluation: EvaluationConfig = Field(default_factory=EvaluationConfig)
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)
    sweep: dict[str, list[Any]] | None = Field(None, description="dotted path -> values; expands to a grid")
    variants: list[dict[str, Any]] | None = Field(None, description="named override sets, beside the grid")

    def resolved(self) -> dict[str, Any]:
        """The config with every default filled in, as plain data (what is saved with each run)."""
        return self.model_dump(mode="json")

    def run_key(self) -> str:
        """Content hash of what determines results (not the name, tracking or sweep block)."""
        data = self.resolved()
        for key in ("name", "description", "tracking", "sweep", "variants", "workspace"):
            data.pop(key, None)
        return stable_hash(data, length=16)



# --------------------------------------------------------------------------- loading
def read_yaml_mapping(path: str | Path, example: str = "configs/quickstart.yaml") -> dict[str, Any]:
    """A YAML file whose top level is a mapping (an experiment or a sweep); clear errors otherwise."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path} (give a YAML file, e.g. {example})")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections, got {type(data).__name__}")
    return data


def load_experiment(source: str | Path | dict[str, Any], overrides: list[str] | None = None) -> Experiment:
    """Load and validate a config from a YAML path or a dict, applying ``a.b.c=value`` overrides."""
    if isinstance(source, dict):
        data, origin = copy.deepcopy(source), "<dict>"
    else:
        data, origin = read_yaml_mapping(source), str(source)
    apply_set_items(data, overrides)
    return validate_experiment(data, origin)


def apply_set_items(data: dict[str, Any], overrides: list[str] | None) -> dict[str, Any]:
    for item in overrides or []:
        set_dotted(data, *parse_override(item))
    return data


def validate_experiment(data: dict[str, Any], origin: str = "<dict>") -> Experiment:
    try:
        return Experiment.model_validate(data)
    except ValidationError as e:
        lines = [format_error(err, "", Experiment) for err in e.errors()]
        raise ConfigError(f"{origin}: invalid config\n  - " + "\n  - ".join(lines)) from None


def parse_override(item: str) -> tuple[str, Any]:
    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected section.key=value, e.g. chunking.chunk_size=400")
    key, raw = item.split("=", 1)
    try:
        value = yaml.safe_load(raw) if raw != "" else ""
    except yaml.YAMLError:
        value = raw
    return key.strip(), value
