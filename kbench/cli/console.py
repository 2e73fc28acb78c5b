"""What the libraries kbench drives may print: set before they are imported (they read these at import)."""
from __future__ import annotations

import os


def quiet_libraries(progress_bars: bool = True) -> None:
    """No model-loading or artifact-upload bars and no MLflow INFO lines; with ``progress_bars`` off, no
    progress bar at all (``--quiet``: tqdm reads TQDM_DISABLE). A value the user set already is kept."""
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # transformers' "Loading weights" bar too
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    if not progress_bars:
        os.environ["TQDM_DISABLE"] = "1"
