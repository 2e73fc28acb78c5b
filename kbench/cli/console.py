"""What the libraries kbench drives may print, and how kbench's own notes look on the console.

Set before the libraries are imported where they read these at import. Only known noise is silenced, each at its
source: progress bars kbench replaces with its own (kbench/progress.py), INFO chatter; never warnings at large.
"""
from __future__ import annotations

import os
import sys
import warnings

from kbench.errors import KbenchDeprecationWarning, KbenchNote


def quiet_libraries(progress_bars: bool = True) -> None:
    """No model-loading or artifact-upload bars and no MLflow INFO lines; with ``progress_bars`` off, no
    progress bar at all (``--quiet``: tqdm reads TQDM_DISABLE). A value the user set already is kept."""
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # transformers' "Loading weights" bar too
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    if not progress_bars:
        os.environ["TQDM_DISABLE"] = "1"


def show_notes_plainly() -> None:
    """kbench's own notes (a renamed key, a knob left out) as ``kbench: note: ...`` on stderr; every other warning
    is shown as Python shows it. Installed by the ``kbench`` script only: a process that calls ``main`` keeps its
    own warning display."""
    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, (KbenchNote, KbenchDeprecationWarning)):
            print(f"kbench: note: {message}", file=file or sys.stderr)
        else:
            shown(message, category, filename, lineno, file, line)

    warnings.showwarning = show


def serve_until_interrupted(server) -> None:
    """Serve ``server`` (a socketserver) in this thread until Ctrl-C, then close its socket: the end of
    ``kbench serve`` and of ``kbench label``'s page."""
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
