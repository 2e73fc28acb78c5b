"""kbench compare --sets: two hand-built sweeps (the same configs on two evaluation sets) in a real MLflow store;
tau, its interval, the winners and the pairs that flip."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kbench.cli import main
from kbench.compare.sets import SetsError, compare_sets
from kbench.tracking import tags as tag

RNG = np.random.default_rng(21)
# set A orders x > y > z clearly; set B swaps x and y (one flip of three pairs): tau-b = (2 - 1) / 3
A = {"x": np.clip(0.8 + RNG.normal(0, 0.05, 30), 0, 1), "y": np.clip(0.5 + RNG.normal(0, 0.05, 30), 0, 1),
     "z": np.clip(0.1 + RNG.normal(0, 0.05, 30), 0, 1)}
B = {"x": np.clip(0.5 + RNG.normal(0, 0.05, 20), 0, 1), "y": np.clip(0.8 + RNG.normal(0, 0.05, 20), 0, 1),
     "z": np.clip(0.1 + RNG.normal(0, 0.05, 20), 0, 1)}


def test_tau_winners_and_flips_of_two_sets():
    found = compare_sets(A, B, names=("heading", "ict"), metric="chunk_ndcg_at_10")
    assert found.tau == pytest.approx(1 / 3)
    assert found.tau_low <= found.tau <= found.tau_high
    assert found.winners == ("x", "y") and found.ties == (["x"], ["y"])
    assert found.ranks == {"x": (1, 2), "y": (2, 1), "z": (3, 3)}
    assert [(f.first, f.second) for f in found.flips] == [("x", "y")]
    flip = found.flips[0]
    assert flip.diff_a == pytest.approx(A["x"].mean() - A["y"].mean()) and flip.diff_a > 0
    assert flip.diff_b == pytest.approx(B["x"].mean() - B["y"].mean()) and flip.diff_b < 0
    assert flip.p_a < 0.05 and flip.p_b < 0.05
    lines = found.lines()
    assert "Kendall's tau-b +0.333 [95% bootstrap over questions:" in "\n".join(lines)
    # issue 42 item 12: the tau interval in words, on the line after tau
    tau_at = next(i for i, line in enumerate(lines) if line.startswith("Kendall's tau-b"))
    assert found.tau_low > 0 and found.agreement == "agree"
    assert lines[tau_at + 1] == ("verdict: heading and ict agree on the order of these configs more than chance would "
                                 "(the interval lies above 0), yet 1 of 3 pairs flip (below)")
    noise = np.random.default_rng(5)
    close = [{c: np.clip(0.5 + noise.normal(0, 0.3, 12), 0, 1) for c in "xyz"} for _ in range(2)]
    unsure = compare_sets(*close, names=("heading", "ict"))
    assert unsure.tau_low <= 0 <= unsure.tau_high and unsure.agreement == "not shown"
    said = unsure.lines()
    tau_at = next(i for i, line in enumerate(said) if line.startswith("Kendall's tau-b"))
    assert said[tau_at + 1].startswith("verdict: these two sets do not agree on the order of these configs: the "
                                       "interval includes 0")
    assert unsure.as_dict()["agreement"] == "not shown"
    assert "best by mean: heading: x, ict: y; x is outside the top tie on ict; y is outside the top tie on heading" in lines
    assert any(line.startswith("flips: 1 of 3 pairs") for line in lines)
    assert any(line.startswith("  x > y on heading (") and line.endswith("significant on both") for line in lines)
    same = compare_sets(A, A, names=("a", "b"))
    assert same.tau == 1.0 and same.flips == [] and "flips: none of the 3 pairs" in "\n".join(same.lines())
    assert "best by mean: the same on both sets: x" in same.lines()
    assert same.agreement == "agree" and any(line.startswith("verdict: a and b agree on the order") for line in
                                             same.lines())


def test_configs_in_one_set_only_are_left_out_and_said():
    found = compare_sets({**A, "only-a": A["z"]}, B, names=("a", "b"))
    assert found.labels == ["x", "y", "z"] and found.left_out == {"only-a": "not in b"}
    assert found.lines()[-1] == "left out (in one set only): only-a (not in b)"
    with pytest.raises(SetsError, match="share 1 config labels"):
        compare_sets({"x": A["x"], "p": A["y"]}, {"x": B["x"], "q": B["y"]})


def _hand_built_sweep(client, experiment_id: str, dataset: str, scores: dict[str, np.ndarray], tmp: Path) -> str:
    """A sweep parent and one FINISHED child per config carrying per_query.parquet, as kbench sweep logs them."""
    parent = client.create_run(experiment_id, tags={tag.SWEEP_ROLE: "parent", "mlflow.runName": f"{dataset} sweep"})
    for label, values in scores.items():
        child = client.create_run(experiment_id, tags={"mlflow.parentRunId": parent.info.run_id,
                                                       tag.SWEEP_ROLE: "child", tag.SWEEP_LABEL: label,
                                                       tag.DATASET: dataset, "mlflow.runName": label})
        folder = tmp / child.info.run_id
        folder.mkdir()
        pd.DataFrame({"query_id": [f"{dataset}-{i:03d}" for i in range(len(values))],
                      "chunk_ndcg_at_10": values, "doc_ndcg_at_10": values,
                      "chunk_recall_at_10": values, "chunk_mrr_at_10": values}).to_parquet(folder / "per_query.parquet")
        client.log_artifact(child.info.run_id, str(folder / "per_query.parquet"))
        client.log_metric(child.info.run_id, "chunk_ndcg_at_10", float(np.mean(values)))
        client.set_terminated(child.info.run_id, "FINISHED")
    client.set_terminated(parent.info.run_id, "FINISHED")
    return parent.info.run_id


def test_compare_sets_cli_on_two_logged_sweeps(tmp_path, capsys):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment_id = client.create_experiment("sets", artifact_location=str(tmp_path / "mlruns"))
    first = _hand_built_sweep(client, experiment_id, "fastapi-heading", A, tmp_path)
    second = _hand_built_sweep(client, experiment_id, "fastapi-ict", B, tmp_path)
    out = tmp_path / "cmp"
    assert main(["compare", "--sets", first, second, "--tracking-uri", uri, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Two evaluation sets, 3 configs in both, chunk_ndcg_at_10 (fastapi-heading: 30 questions, " \
           "fastapi-ict: 20)" in printed
    assert "Kendall's tau-b +0.333" in printed and "x > y on fastapi-heading" in printed
    saved = json.loads((out / "sets.json").read_text())
    assert saved["tau"] == pytest.approx(1 / 3) and saved["winners"] == ["x", "y"]
    assert [(f["first"], f["second"]) for f in saved["flips"]] == [("x", "y")]
    # a run that is no sweep parent, run ids beside --sets, a metric the runs lack: one line, exit 2
    child = client.search_runs([experiment_id], f"tags.`{tag.SWEEP_LABEL}` = 'x'")[0].info.run_id
    assert main(["compare", "--sets", first, child, "--tracking-uri", uri]) == 2
    assert f"{child} is not a sweep's parent run" in capsys.readouterr().err
    assert main(["compare", "--sets", first, second, "--sweep", first, "--tracking-uri", uri]) == 2
    assert "--sets compares two sweeps by themselves" in capsys.readouterr().err
    assert main(["compare", "--sets", first, second, "--metric", "span_iou_at_5", "--tracking-uri", uri]) == 2
    assert "have no per-query span_iou_at_5" in capsys.readouterr().err
