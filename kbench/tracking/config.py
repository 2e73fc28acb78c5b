"""The tracking section: which MLflow store and experiment a run is logged to, and what its traces hold."""
from __future__ import annotations

from pydantic import Field

from kbench.registry import StrictModel, in_unit


class TraceSettings(StrictModel):
    """One MLflow trace per question (kbench.tracking.mlflow_traces), built from the run folder after the run."""

    enabled: bool = Field(True, description="false: no candidates.parquet and no traces (the dataset input and "
                          "prompts are still logged)")
    max_queries: int = Field(1000, ge=0, description="trace every question up to this many; beyond it a seeded "
                             "sample of this many (0: no traces)", json_schema_extra=in_unit("questions"))
    seed: int = Field(0, description="the sample's seed when a run has more questions than max_queries")
    max_documents: int = Field(10, ge=1, description="documents per span: the first of the run's ranking, of each "
                               "leg's list, of the fused candidates and of the reranked list (MLflow's retrieval "
                               "judges grade each document of the ranking's span)",
                               json_schema_extra=in_unit("documents"))


class TrackingConfig(StrictModel):
    enabled: bool = Field(True, description="false: nothing goes to MLflow (the run folder is still written)")
    tracking_uri: str | None = Field(None, description="default: MLFLOW_TRACKING_URI or <workspace>/mlflow.db")
    experiment: str = Field("kbench", description="the MLflow experiment the run is logged to")
    experiment_description: str | None = Field(
        None, description="the MLflow experiment's description (markdown); default: what kbench logs there and a "
        "link to the headline view; a description edited in MLflow's UI is never overwritten")
    run_name: str | None = Field(None, description="the MLflow run's name; default: name")
    tags: dict[str, str] = Field(default_factory=dict, description="extra MLflow tags on the run")
    traces: TraceSettings = Field(default_factory=TraceSettings)
