"""kbench sweep --until-decided on a generated set of the demo's pages (BM25 only: no model load): the set grows with
more of its documents' questions on the same indexed documents, looks until decided or the budget, ends with the
bound, and is logged as one MLflow run; a set whose documents are not the generator's now is refused."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from kbench.cli import main
from kbench.datasets.synthetic import build_from_source
from tests.conftest import DEMO, make_config


def documents(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder / "docs").as_posix(): p.read_bytes() for p in (folder / "docs").rglob("*")
            if p.is_file()}


def sweep_file(workspace: Path, tmp_path: Path, dataset: Path) -> Path:
    data = make_config(workspace, dataset={"path": str(dataset)}, retrieval={"legs": ["bm25"], "top_k": 10})
    data.update(name="t", sweep={"chunking.chunk_size": [200, 1500], "retrieval.leg_params.bm25.k1": [0.3, 1.2]})
    config = tmp_path / "until.yaml"
    config.write_text(yaml.safe_dump(data))
    return config


def test_until_decided_grows_a_generated_set_on_its_own_documents_and_ends_with_the_bound(workspace, tmp_path,
                                                                                         capsys):
    given = tmp_path / "set"
    build_from_source(str(DEMO / "docs"), given, method="heading", max_questions=10, seed=0)
    config = sweep_file(workspace, tmp_path, given)
    assert main(["sweep", str(config), "--until-decided", "--max-questions", "40", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert re.search(rf"until decided: 4 configs on the 10 questions of {given}, then up to \d+ more its documents "
                     r"give \(heading, seed 0; the same indexed documents\)", out)
    assert "looks at 10, 20, 40 questions" in out
    grown = next((workspace / "sets").glob("grown-*"))
    assert documents(grown) == documents(given)  # the same corpus, more questions
    own = (given / "questions.jsonl").read_text().splitlines()
    assert (grown / "questions.jsonl").read_text().splitlines()[:10] == own
    assert re.search(r"  bound: no config here is better than \S+ by more than \d\.\d{4} on chunk_ndcg_at_10 \(95% "
                     r"over every look: alpha 0\.05/\(k\(k\+1\)\) at look k", out)
    assert re.search(r"stopped after look \d of 3 planned: (decided at the margin|the question budget is spent)", out)
    run_id = re.search(r"MLflow run (\w+)", out).group(1)
    client = MlflowClient(f"sqlite:///{workspace / 'mlflow.db'}")
    run = client.get_run(run_id)
    assert run.data.tags["kbench.sweep.search"] == "until-decided"
    assert " · until-decided of 4 configs · " in run.data.tags["mlflow.runName"]
    assert float(run.data.tags["kbench.sweep.bound"]) == round(run.data.metrics["recommendation_bound"], 4)
    summary = json.loads(Path(client.download_artifacts(run_id, "search.json", str(tmp_path))).read_text())
    assert [look["questions"] for look in summary["looks"]][:2] == [10, 20]
    assert summary["stopped"] in ("decided", "questions")
    assert summary["recommendation"]["bound"] == pytest.approx(run.data.metrics["recommendation_bound"])


def test_until_decided_refuses_a_set_whose_documents_are_not_the_generators_and_stray_budgets(workspace, tmp_path,
                                                                                              capsys):
    given = tmp_path / "set"
    build_from_source(str(DEMO / "docs"), given, method="heading", max_questions=10, seed=0)
    page = next((given / "docs").rglob("*.md"))
    page.write_text(page.read_text() + "\n## A heading an older kbench left in\n\nIts body.\n")  # as before issue 50
    config = sweep_file(workspace, tmp_path, given)
    assert main(["sweep", str(config), "--until-decided", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "its indexed documents differ from what the generator gives now" in err and "--force" in err
    assert main(["sweep", str(config), "--max-questions", "40"]) == 2
    assert "are the budgets of --until-decided" in capsys.readouterr().err
