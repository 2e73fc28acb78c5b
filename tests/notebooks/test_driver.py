"""The driver reads a notebook's parameters as papermill does, without importing papermill."""
from __future__ import annotations

import json

import papermill

from kbench.studies.driver import declared_parameters, notebook_names, notebook_path


def test_declared_parameters_match_papermills_inspection_on_every_notebook():
    names = notebook_names()
    assert len(names) >= 8
    for name in names:
        path = notebook_path(name)
        expected = {k: v["default"] for k, v in papermill.inspect_notebook(str(path)).items()}
        assert expected, name
        assert declared_parameters(path) == expected, name


def test_declared_parameters_match_papermill_on_the_cases_its_grouping_handles(tmp_path):
    source = ("# a comment line\n"
              "k = 5  # the cut-off\n"
              "\n"
              "chunkers = {  # spread over lines\n"
              "    'a': {'strategy': 'fixed'},  # first\n"
              "    'b': 2,\n"
              "}  # the last line's comment is the help\n"
              "n: int = 3\n"
              "a = b = 2\n"
              "name = 'demo'\n")
    cells = [{"id": "parameters", "cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": source, "outputs": [],
              "execution_count": None}]
    path = tmp_path / "t.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {"kernelspec": {"name": "python3", "language": "python",
                                                                             "display_name": "Python 3"}},
                                "nbformat": 4, "nbformat_minor": 5}), encoding="utf-8")
    expected = {k: v["default"] for k, v in papermill.inspect_notebook(str(path)).items()}
    assert declared_parameters(path) == expected
    assert expected["chunkers"] == "{'a': {'strategy': 'fixed'},'b': 2,}" and "a" not in expected
