"""kbench datasets match: the classifier two-sample test separates the demo set's hand-written questions from a heading
set built on the same documents, and not two halves of one set; DeLong's interval against scikit-learn; the forms;
the line a sweep will say."""
from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from kbench.cli import main as kbench_main
from kbench.datasets.config import DatasetConfig
from kbench.datasets.query_log import import_queries
from kbench.datasets.synthetic import build_from_source
from kbench.evalsets.match import (FORMS, Profile, QuestionSet, classifier_auc, decision_line, delong_interval,
                                   match_sets)
from tests.conftest import DEMO


@pytest.fixture(scope="module")
def heading_set(tmp_path_factory):
    out = tmp_path_factory.mktemp("match") / "demo-heading"
    build_from_source(str(DEMO / "docs"), out, method="heading", per_doc=4, seed=0)
    return out


def test_delong_is_the_auc_and_its_interval_covers():
    rng = np.random.default_rng(0)
    y = np.r_[np.zeros(200, dtype=int), np.ones(150, dtype=int)]
    scores = np.r_[rng.normal(0, 1, 200), rng.normal(0.8, 1, 150)]
    auc, low, high = delong_interval(y, scores)
    assert auc == pytest.approx(roc_auc_score(y, scores))
    assert low < auc < high and 0.05 < high - low < 0.15
    same = delong_interval(y, rng.normal(0, 1, 350))  # no signal: the interval holds 0.5
    assert same[1] < 0.5 < same[2]


def test_the_test_separates_two_distributions_and_not_two_halves_of_one(heading_set, workspace):
    report = match_sets("demo", [str(heading_set)], workspace, write=False)
    (found,) = report.sets
    assert found.method == "heading" and found.auc.n_log == 98 and found.auc.low > 0.8
    assert report.halves.low < 0.5 < report.halves.high  # the demo questions against their own halves
    assert report.closest is found
    assert found.profile.forms["keywords only"] > 0.5 > report.log_profile.forms["keywords only"]
    assert found.profile.words[0] < report.log_profile.words[0]  # heading paths are shorter than questions
    assert report.log_profile.overlap is not None and found.profile.overlap is not None
    text = "\n".join(report.lines())
    assert "closest to the log: demo-heading (heading)" in text and "halves" in text

    rng = np.random.default_rng(1)  # the classifier itself on vectors from one distribution
    one = rng.normal(size=(120, 8))
    assert classifier_auc(one[:60], one[60:]).low < 0.5


def test_the_command_writes_what_a_sweep_says(heading_set, workspace, tmp_path, capsys):
    log = tmp_path / "queries.txt"
    questions = [q["question"] for q in map(json.loads, (DEMO / "questions.jsonl").read_text().splitlines())]
    log.write_text("\n".join(questions[:60]) + "\n")
    assert kbench_main(["datasets", "match", str(log), str(heading_set), "--workspace", str(workspace),
                        "--json", str(tmp_path / "match.json")]) == 0
    printed = capsys.readouterr().out
    assert "two-sample classifier" in printed and "queries.txt (log)" in printed and "written:" in printed
    assert json.loads((tmp_path / "match.json").read_text())["closest"] == "demo-heading"
    line = decision_line(DatasetConfig(path=str(heading_set)), workspace)
    assert line.startswith("the decision rests on demo-heading (heading questions), AUC ")
    assert "against the log queries.txt" in line
    assert decision_line(DatasetConfig(name="demo"), workspace) is None  # never matched: nothing to say

    real = tmp_path / "real"
    import_queries(str(log), real, docs=str(DEMO / "docs"))
    assert decision_line(DatasetConfig(path=str(real)), workspace).startswith(
        "the decision rests on real: real questions from a query log (60 questions)")


def test_question_forms():
    texts = ["How do I add CORS?", "FastAPI cors", "ValueError: field required in my model", "use `Depends()`",
             "what is a dependency"]  # FastAPI's capitals are no code
    profile = Profile.of(QuestionSet("x", "log", texts))
    assert profile.forms == {"question": 0.4, "how-to": 0.2, "keywords only": 0.2, "error message": 0.2, "code": 0.2}
    assert set(FORMS) == set(profile.forms) and profile.overlap is None
    assert profile.first_words["how"] == 0.2 and profile.first_words["what"] == 0.2
