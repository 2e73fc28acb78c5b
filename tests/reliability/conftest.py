"""Fixtures of the hostile-input tests; the builders live in tests/reliability/inputs.py."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.inputs import copy_demo


@pytest.fixture
def demo_copy(tmp_path) -> Path:
    """A copy of the demo span dataset, to damage."""
    return copy_demo(tmp_path)
