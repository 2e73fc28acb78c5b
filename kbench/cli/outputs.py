"""Where a command will write, checked before it works: a run or a judgement is minutes, a typo is not worth them."""
from __future__ import annotations

import os
import tempfile
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
    if (problem := write_problem(target)) is not None:
        return f"{flag} {path}: not writable ({problem}); give a path you may write"
    return None


def write_problem(target: Path) -> str | None:
    """Why ``target`` cannot be written, found by trying (a permission bit says nothing to root, nor of a
    read-only mount or /proc): an existing file opened for appending, nothing written; else a file created in its
    folder and removed at once. None when it can be."""
    try:
        if target.exists():
            with open(target, "ab"):
                pass
        else:
            handle, probe = tempfile.mkstemp(prefix=".kbench-write-check-", dir=target.parent)
            os.close(handle)
            os.unlink(probe)
    except OSError as e:
        return e.strerror or type(e).__name__
    return None
