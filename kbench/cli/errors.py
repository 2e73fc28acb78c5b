"""Turn the errors a user can fix into one clear message and exit code 2, not a traceback."""
from __future__ import annotations

import errno
import sys
from contextlib import contextmanager

from pydantic import ValidationError

from kbench.errors import SECRET_VALUE, UserError, format_error
from kbench.packages import import_error_line

# Every error a user can fix is a kbench.errors.UserError (a config, a dataset, a model not installed, an endpoint
# down, a quota used up: what finished is cached); a path the user gave that is missing or not theirs comes from
# Python itself.
USER_ERRORS = (UserError, FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)

# The machine, not the input: what to do about each. Anything else raised as OSError stays a traceback (a bug).
MOVE = "or set workspace (or KBENCH_WORKSPACE) to another folder"
ENVIRONMENT_FIXES = {
    errno.ENOSPC: f"the disk is full: free space {MOVE} on another disk",
    errno.EDQUOT: f"the disk quota is used up: free space {MOVE} on another disk",
    errno.EROFS: f"that file system is read-only: remount it writable {MOVE}",
    errno.EACCES: f"no permission to write there: make it writable {MOVE}",
    errno.EPERM: f"the system refused the operation: make the folder yours {MOVE}",
    errno.EIO: "the disk reported an I/O error: check the disk, then run again",
    errno.EMFILE: "too many open files: raise the limit (ulimit -n) and run again",
}


@contextmanager
def report_errors(command: str | None = None):
    """Errors the user can fix as ``kbench: error: <one line>`` and exit 2 (``command``: what a missing package's
    line names as needing it)."""
    try:
        yield
    except USER_ERRORS as e:
        print(f"kbench: error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    except OSError as e:
        fix = ENVIRONMENT_FIXES.get(e.errno)
        if fix is None:
            raise
        where = f": {e.filename}" if e.filename else ""
        print(f"kbench: error: {e.strerror or e}{where}; {fix}", file=sys.stderr)
        raise SystemExit(2) from None
    except ValidationError as e:  # a config value set after loading (a sweep label, a TREC run tag as name)
        problems = "; ".join(format_error(err, "", None) for err in e.errors())
        print(f"kbench: error: {problems}", file=sys.stderr)
        raise SystemExit(2) from None
    except ImportError as e:  # a package kbench needs, missing or broken where no optional_import stood
        if (line := import_error_line(e, f"kbench {command}" if command else "this command")) is None:
            raise  # kbench's own module: a bug
        print(f"kbench: error: {line}", file=sys.stderr)
        raise SystemExit(2) from None
    except Exception as e:
        if (line := mlflow_refusal(e)) is None:
            raise
        print(f"kbench: error: {line}", file=sys.stderr)
        raise SystemExit(2) from None


# What MLflow answers to a request built from bad input (a name, an id, a filter): the user's to fix, not a bug.
# Any other MlflowException (a store that cannot be read, an internal error) stays a traceback.
MLFLOW_INPUT_ERRORS = {"INVALID_PARAMETER_VALUE", "RESOURCE_DOES_NOT_EXIST", "BAD_REQUEST", "RESOURCE_ALREADY_EXISTS"}


def mlflow_refusal(error: Exception) -> str | None:
    """One line for an MlflowException that bad input caused, else None (mlflow is not imported for this)."""
    mlflow_exceptions = sys.modules.get("mlflow.exceptions")
    if mlflow_exceptions is None or not isinstance(error, mlflow_exceptions.MlflowException):
        return None
    if error.error_code not in MLFLOW_INPUT_ERRORS:
        return None
    message = " ".join(str(error.message).split())
    if SECRET_VALUE.search(message):
        message = "(its message is not shown: it holds something key-like)"
    elif len(message) > 300:
        message = message[:297] + "..."
    return f"MLflow refused the request: {message}; check the name or id you gave"
