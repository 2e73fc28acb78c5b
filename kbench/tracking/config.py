"""The tracking section: which MLflow store and experiment a run is logged to."""
from __future__ import annotations

from pydantic import Field

from kbench.registry import StrictModel


class TrackingConfig(StrictModel):
    enabled: bool = True
    tracking_uri: str | None = Field(None, description="default: MLFLOW_TRACKING_URI or <workspace>/mlflow.db")
    experiment: str = "kbench"
    run_name: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)

