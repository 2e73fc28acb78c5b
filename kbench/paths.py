"""Where things live: the repository, the workspace, shared data and prepared models."""
from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def workspace_dir(workspace: str | Path = "experiments") -> Path:
    """The experiments workspace (mlflow.db, mlruns/, cache/, stores/); relative paths are from the cwd."""
    path = Path(os.environ.get("KBENCH_WORKSPACE", workspace)).expanduser()
    return path.resolve()


def tracking_uri(configured: str | None, workspace: Path) -> str:
    """The MLflow store a run uses: the config's ``tracking.tracking_uri``, else MLFLOW_TRACKING_URI, else
    ``<workspace>/mlflow.db``."""
    return configured or os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{workspace / 'mlflow.db'}"


def shared_datasets_dir() -> Path:
    """``../shared/datasets`` beside the repository, or KBENCH_DATA_DIR."""
    env = os.environ.get("KBENCH_DATA_DIR")
    return Path(env).expanduser().resolve() if env else (REPO_ROOT.parent / "shared" / "datasets").resolve()


def models_dir() -> Path:
    """Models kbench prepares or trains (joined mpnet, trained rerankers); KBENCH_MODELS_DIR overrides."""
    env = os.environ.get("KBENCH_MODELS_DIR")
    return Path(env).expanduser().resolve() if env else REPO_ROOT / "experiments" / "models"
