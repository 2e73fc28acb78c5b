"""A trained judge (issue 54 item 5) on real data: a MiniLM cross-encoder trained on a heading set built from the demo
set's documents (its labels, hard negatives from two BM25 runs' pools), saved by name; its kappa reported against the
demo set's own labels (hand-written questions with spans); and `kbench label` reporting it beside a weak served
model's and using it for PPI++ because it agrees better."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from kbench.cli import main as kbench_main
from kbench.config import load_experiment
from kbench.datasets import load_dataset
from kbench.datasets.config import DatasetConfig
from kbench.datasets.query_log import import_queries
from kbench.datasets.synthetic import build_from_source
from kbench.judging.trained import TrainedJudge
from kbench.labelling.labels import LabelsFile
from kbench.labelling.pool import LabelPool, set_label
from kbench.judging.judge import Pair
from kbench.runner import run_experiment
from tests.conftest import DEMO, make_config

NAME = "demo-judge"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KBENCH_MODELS_DIR", str(folder))
        yield folder


@pytest.fixture(scope="module")
def trained(demo_runs, models, tmp_path_factory):
    """(the training's printed lines, the heading set's run ids): the judge trained by the command."""
    ws, uri, _ = demo_runs
    heading = tmp_path_factory.mktemp("generated") / "demo-heading"
    build_from_source(str(DEMO / "docs"), heading, method="heading", per_doc=3, seed=0)
    ids = []
    for size in (400, 900):
        config = load_experiment(make_config(ws, name=f"heading-{size}", dataset={"path": str(heading)},
                                             chunking={"strategy": "fixed", "chunk_size": size, "chunk_overlap": 0},
                                             retrieval={"legs": ["bm25"], "top_k": 10}, evaluation={"k": [5, 10]}))
        ids.append(run_experiment(config, progress=False, log=True).run_id)
    import contextlib
    import io

    printed, logged = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(logged):
        assert kbench_main(["judge", *ids, "--train", NAME, "--max-pairs", "160", "--k", "5", "--tracking-uri", uri,
                            "--workspace", str(ws)]) == 0
    return printed.getvalue() + logged.getvalue(), ids


def test_the_trained_judge_is_saved_by_name_with_its_card(trained, models, demo_runs):
    printed, ids = trained
    card = json.loads((models / NAME / "kbench_model.json").read_text())
    assert card["kind"] == "judge" and card["base"] == "all-MiniLM-L6-v2" and sorted(card["runs"]) == sorted(ids)
    assert card["counts"]["pairs"] <= 160 and card["counts"]["positives"] > 0 and card["counts"]["negatives"] > 0
    assert card["combination"]["features"] == ["cross_encoder_logit", "minilm_cosine"]
    assert card["combination"]["held_out_auc"]["minilm_cosine"] > 0.6
    assert re.search(r"epoch\(s\) of \d+ steps: about \d+ s \(one step took", printed)  # the estimate came first
    assert f"trained judge {NAME} on {card['counts']['pairs']} pairs" in printed
    judge = TrainedJudge.load(NAME, str(demo_runs[0]))  # its embeddings cached in the test's workspace
    grades = judge.grade([("On which port does lumend expose metrics?", "lumend serves Prometheus metrics on port "
                           "9464 at /metrics."), ("On which port does lumend expose metrics?", "Retries back off.")])
    assert all(g in (0, 1, 2, 3) for g in grades) and grades[0] >= grades[1]


def test_its_kappa_is_reported_against_the_labels(trained, demo_runs, capsys):
    ws, uri, ids = demo_runs
    assert kbench_main(["judge", *ids, "--calibrate", "--judge-model", NAME, "--sample", "40", "--k", "5",
                        "--tracking-uri", uri, "--workspace", str(ws)]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith(f"trained judge {NAME}"))
    assert "against the dataset's labels: Cohen's kappa" in line
    assert float(re.search(r"kappa (-?[\d.]+)", line).group(1)) > 0


@pytest.fixture(scope="module")
def log_runs(demo_runs, tmp_path_factory):
    """Two BM25 runs over the demo set's questions imported as a query log: real questions, no labels."""
    ws, uri, _ = demo_runs
    log = tmp_path_factory.mktemp("log") / "questions.txt"
    rows = [json.loads(line) for line in (DEMO / "questions.jsonl").read_text().splitlines()]
    log.write_text("\n".join(r["question"] for r in rows[:30]) + "\n")
    real = log.with_name("real")
    import_queries(str(log), real, docs="demo")
    ids = []
    for size in (400, 900):
        config = make_config(ws, name=f"log-{size}", chunking={"strategy": "fixed", "chunk_size": size,
                                                              "chunk_overlap": 0},
                             retrieval={"legs": ["bm25"], "top_k": 10}, evaluation={"k": [5, 10]})
        config["dataset"] = {"path": str(real)}
        ids.append(run_experiment(load_experiment(config), progress=False, log=True).run_id)
    return ids, {r["question"]: r["query_id"] for r in rows}


def test_kbench_label_uses_the_trained_judge_when_it_agrees_better(trained, demo_runs, log_runs, tmp_path, capsys):
    """The flow of a query log: real questions without labels, two runs that scored nothing, a pool of both runs'
    top 5 (no recommendation to pick contenders from yet). The served model here is a stand-in that grades at random
    (SmolLM2 takes minutes a pool on 2 cores and reads about half its answers; a judge carrying no information is what
    it amounts to); the person is the demo set's own labels of those questions (hand-written, with spans), graded
    on the random share's first questions."""
    ws, uri, _ = demo_runs
    ids, demo_id = log_runs
    labels = tmp_path / "labels.qrels"
    served = tmp_path / "served.qrels"
    served.write_text("")
    args = ["label", *ids, "--k", "5", "--labels", str(labels), "--scale", "binary", "--tracking-uri", uri,
            "--workspace", str(ws), "--export-label-studio", str(tmp_path / "ls")]
    assert kbench_main(args) == 0  # the pool first, to give the stand-in its pairs
    pool = LabelPool.read(labels.with_name(labels.name + ".pool.json"))
    assert "no recommendation yet" in pool.recommendation[0] and len(pool.configs) == 2
    rng = np.random.default_rng(0)
    served.with_name("served.qrels.json").write_text(json.dumps({"judge_model": "served-stand-in", "judgements": [
        {"query_id": p.query_id, "doc_id": p.doc_id, "start": p.start, "end": p.end, "grade": int(rng.integers(0, 4))}
        for p in pool.pairs]}))
    for made in tmp_path.glob("labels.qrels*"):
        made.unlink()
    assert kbench_main([*args, "--judged", str(served), "--judge-model", NAME]) == 0
    pool = LabelPool.read(labels.with_name(labels.name + ".pool.json"))
    assert pool.model.startswith("judge served-stand-in") and [m.name.split(" (")[0] for m in pool.other_models] == [
        f"trained judge {NAME}"]  # the set has no labels of its own to be a third model
    demo = load_dataset(DatasetConfig(name="demo"))
    person = LabelsFile.open(labels, pool, "demo-labels")
    for q in pool.plan.permutation[:14]:  # the random share's first questions, whole
        for i, p in enumerate(pool.pairs):
            if pool.question_of[i] == q:
                truth = demo_id[pool.questions[p.query_id]]
                person.add(i, int(set_label(demo, Pair(truth, p.doc_id, p.start, p.end)) or 0))
    capsys.readouterr()
    assert kbench_main(["label", "--pool", str(labels) + ".pool.json", "--report", "--no-mlflow"]) == 0
    out = capsys.readouterr().out
    first = re.search(r"Cohen's kappa (-?[\d.]+) on \d+ pairs graded by both \(([a-z -]+?) \(", out)
    beside = re.search(r"beside it, ([a-z -]+?) \(.*?Cohen's kappa (-?[\d.]+)", out)
    assert first and beside, out
    assert first.group(2) == f"trained judge {NAME}" and beside.group(1) == "judge served-stand-in", out
    assert float(first.group(1)) > float(beside.group(2)), out
    assert f"PPI++ uses trained judge {NAME}" in out
