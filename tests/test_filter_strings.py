"""Names never become code (issue 45): every MLflow filter string built from a user's text goes through
``kbench.filter_strings.literal``; each command that takes a name is run with hostile names."""
from __future__ import annotations

import shlex

import pytest
from mlflow.utils.search_utils import SearchEvaluationDatasetsUtils, SearchUtils

from kbench.cli import main
from kbench.datasets.mlflow_questions import question_records
from kbench.filter_strings import FilterValueError, literal

HOSTILE = ["o'brien", 'say "hi"', "back\\slash\\", "x' OR name LIKE '%", "a\\'b"]


@pytest.mark.parametrize("value", HOSTILE)
def test_a_literal_is_read_back_by_mlflows_parsers_as_the_very_value(value):
    (runs,) = SearchUtils.parse_search_filter(f"tags.`kbench.run_folder` = {literal(value, 'name')}")
    (datasets,) = SearchEvaluationDatasetsUtils.parse_search_filter(f"name = {literal(value, 'name')}")
    assert runs["value"] == datasets["value"] == value and runs["comparator"] == "="


@pytest.mark.parametrize("value", ["both ' and \"", "a\nb"])
def test_a_name_no_literal_can_hold_is_refused_by_name(value):
    with pytest.raises(FilterValueError, match="^--name: holds"):
        literal(value, "--name")


def test_publish_and_read_back_questions_under_hostile_names(workspace, capsys):
    """`kbench datasets publish DATASET --name "o'brien"` was a traceback (MlflowException: Invalid clause(s) in
    filter string: name = 'o'brien'); a name like `x' OR name LIKE '%` would have matched every dataset."""
    uri = f"sqlite:///{workspace / 'mlflow.db'}"
    for name in ("o'brien", "x' OR name LIKE '%"):
        assert main(["datasets", "publish", "demo", "--name", name, "--workspace", str(workspace),
                     "--tracking-uri", uri]) == 0
        out = capsys.readouterr().out
        assert "published 98 questions of demo" in out
        assert len(question_records(name, uri)) == 98  # found by its exact name, once
        # the read-back hint is one a shell takes as written: the name arrives whole
        hint = out.split("a run reads them back with: ", 1)[1].splitlines()[0]
        assert shlex.split(hint)[:2] == ["--set", f"dataset.questions_from={name}"], hint
    with pytest.raises(SystemExit) as exit_:
        main(["datasets", "publish", "demo", "--name", "both ' and \"", "--workspace", str(workspace),
              "--tracking-uri", uri])
    assert exit_.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("kbench: error: --name: holds both a single and a double quote")


def test_commands_that_take_a_run_or_sweep_name_refuse_hostile_ones_in_one_line(workspace, capsys):
    uri = f"sqlite:///{workspace / 'mlflow.db'}"
    for argv in (["compare", "--sweep", "abc' OR name LIKE '%", "--tracking-uri", uri],
                 ["runs", "show", "x' or '1'='1", "--tracking-uri", uri],
                 ["judge", "x\" OR 'a", "--calibrate", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                  "--tracking-uri", uri]):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and "Traceback" not in err and "MlflowException" not in err, (argv, err)
        assert len([x for x in err.splitlines() if x.startswith("kbench: error:")]) == 1, (argv, err)
