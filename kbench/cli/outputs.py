"""Where a command will write, checked before it works: a run or a judgement is minutes, a typo is not worth them."""
from __future__ import annotations

import os
from pathlib import Path


def output_problem(path: str | None, flag: str, stdout_ok: bool = False) -> str | None:
    """Why a file could not be written at ``path`` (a folder, a missing folder, no permission), or None.
    ``None`` is fine, and ``-`` where it means stdout (``stdout_ok``)."""
    if path is None or (path == "-" and stdout_ok):
        return None
    target = Path(path).expanduser()
    folder = target.parent
    if target.is_dir():
        return f"{flag} {path}: is a folder; give a file path"
    if not folder.is_dir():
        return f"{flag} {path}: the folder {folder} does not exist; create it or give another path"
    if not os.access(target if target.exists() else folder, os.W_OK):
        return f"{flag} {path}: not writable; give a path you may write"
    return None
