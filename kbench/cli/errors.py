"""Turn the errors a user can fix into one clear message and exit code 2, not a traceback."""
from __future__ import annotations

import sys
from contextlib import contextmanager

from pydantic import ValidationError

from kbench.config import ConfigError
from kbench.datasets.beir import DatasetError
from kbench.embedding.models import ModelNotInstalledError
from kbench.errors import format_error
from kbench.llm import LLMError
from kbench.registry import UnknownNameError
from kbench.runner import RunError
from kbench.tracking.export import TrecFormatError
from kbench.tracking.read import RunReadError

USER_ERRORS = (ConfigError, DatasetError, ModelNotInstalledError, UnknownNameError, FileNotFoundError, RunError,
               RunReadError, TrecFormatError, PermissionError, IsADirectoryError, NotADirectoryError,
               LLMError)  # an endpoint down, a quota used up, a refused key: what finished is cached


@contextmanager
def report_errors():
    try:
        yield
    except USER_ERRORS as e:
        print(f"kbench: error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    except ValidationError as e:  # a config value set after loading (a sweep label, a TREC run tag as name)
        problems = "; ".join(format_error(err, "", None) for err in e.errors())
        print(f"kbench: error: {problems}", file=sys.stderr)
        raise SystemExit(2) from None
