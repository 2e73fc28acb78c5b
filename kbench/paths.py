"""Where things live: the repository, the workspace, shared data and prepared models."""
from __future__ import annotations

import os
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


DEFAULT_WORKSPACE = "experiments"
_said: set[tuple[str, str]] = set()


def workspace_dir(workspace: str | Path = DEFAULT_WORKSPACE) -> Path:
    """The experiments workspace (mlflow.db, mlruns/, cache/, stores/); relative paths are from the cwd.

    ``KBENCH_WORKSPACE`` wins over ``workspace`` (a config's ``workspace:``, a ``--workspace``), so one variable
    moves every command to a scratch or shared folder. When the two name different folders, that is said once per
    process on stderr, with the folder used and how to use the other: a config's workspace never loses in silence."""
    env = os.environ.get("KBENCH_WORKSPACE")
    if not env:
        return Path(workspace).expanduser().resolve()
    chosen = Path(env).expanduser().resolve()
    if str(workspace) != DEFAULT_WORKSPACE:
        asked = Path(workspace).expanduser().resolve()
        if asked != chosen and (str(asked), str(chosen)) not in _said:
            _said.add((str(asked), str(chosen)))
            print(f"kbench: note: KBENCH_WORKSPACE wins over workspace: {workspace}: writing to {chosen}, not "
                  f"{asked} (unset KBENCH_WORKSPACE to use {asked})", file=sys.stderr, flush=True)
    return chosen


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


EXPORTS_FOLDER = "exports"  # in a workspace's cache/
EXPORTED_FOLDER = "exported"  # in a models directory


def exports_dir(cache_root: Path | None = None) -> Path:
    """Where kbench writes the models it derives (ONNX exports, int8 builds): under the models directory when one
    is given (KBENCH_MODELS_DIR), else in the run's workspace cache (``<workspace>/cache/exports``), so a run
    with a workspace writes nothing outside it; with neither (a library call with no workspace),
    models_dir()/exported as before."""
    if os.environ.get("KBENCH_MODELS_DIR"):
        return models_dir() / EXPORTED_FOLDER
    if cache_root is not None:
        return Path(cache_root) / EXPORTS_FOLDER
    return models_dir() / EXPORTED_FOLDER
