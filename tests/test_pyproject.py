"""pyproject.toml reads without setuptools' deprecation banners: `make` (pip install -e .) printed
"project.license as a TOML table is deprecated" three times before the license became an SPDX string."""
from __future__ import annotations

import warnings

from setuptools.config.pyprojecttoml import apply_configuration
from setuptools.dist import Distribution

from kbench.paths import REPO_ROOT


def test_pyproject_applies_without_a_setuptools_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        distribution = apply_configuration(Distribution(), REPO_ROOT / "pyproject.toml")
    assert [str(warning.message).splitlines()[0] for warning in caught] == []
    assert distribution.metadata.license_expression == "MIT"
