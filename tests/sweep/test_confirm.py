"""The confirmation split: seeded halves, the winner chosen on one and measured on the other, and the CLI on a
real BM25 sweep of the demo set (no embedding)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from kbench.cli import main
from kbench.sweep.confirm import confirm_on_half, confirm_on_split, split_halves
from tests.conftest import make_config


def test_halves_are_disjoint_cover_every_query_and_follow_the_seed():
    ids = [f"q{i}" for i in range(11)]
    a, b = split_halves(ids, 3)
    assert set(a) | set(b) == set(ids) and not set(a) & set(b) and len(a) == 5
    assert split_halves(list(reversed(ids)), 3) == (a, b)  # the order given does not matter
    assert split_halves(ids, 4) != (a, b)


def test_the_winners_gain_where_chosen_shrinks_where_held_back():
    """Twenty configs of pure noise: the best on the select half looks better than the baseline there, and the
    held-back half shows the gain for what it is."""
    rng = np.random.default_rng(1)
    ids = [f"q{i:03d}" for i in range(200)]
    scores = {f"c{j}": pd.Series(rng.random(200), index=ids) for j in range(20)}
    c = confirm_on_half(scores, "c0", "m", seed=1, test="t")
    select, confirm = split_halves(ids, 1)
    means = {k: s.loc[select].mean() for k, s in scores.items()}
    assert c.winner == max(means, key=means.get)
    assert np.isclose(c.selected_diff, means[c.winner] - means["c0"])
    assert np.isclose(c.confirmed_diff, scores[c.winner].loc[confirm].mean() - scores["c0"].loc[confirm].mean())
    assert c.selected_diff > 0.05 and abs(c.confirmed_diff) < c.selected_diff
    assert c.n_select == c.n_confirm == 100 and any("held back" in line for line in c.lines())


def test_confirm_on_split_uses_the_confirm_scores():
    sel = {"base": pd.Series([0.1, 0.2], index=["a", "b"]), "win": pd.Series([0.5, 0.6], index=["a", "b"])}
    conf = {"base": pd.Series([0.3, 0.3, 0.4], index=["x", "y", "z"]), "win": pd.Series([0.3, 0.5, 0.4], index=["x", "y", "z"])}
    c = confirm_on_split(sel, conf, "base", "win", "m", "train", "test", test="t")
    assert np.isclose(c.selected_diff, 0.4) and np.isclose(c.confirmed_diff, 0.2 / 3) and c.n_confirm == 3
    overlapping = {k: pd.concat([v, sel[k]]) for k, v in conf.items()}  # the selection's queries left out
    assert confirm_on_split(sel, overlapping, "base", "win", "m", "train", "test", test="t").n_confirm == 3
    with pytest.raises(ValueError, match="same queries"):
        confirm_on_split(sel, sel, "base", "win", "m", "train", "test", test="t")


def test_sweep_cli_confirms_on_a_half(tmp_path, capsys):
    data = make_config(tmp_path / "ws", dataset={"name": "demo", "max_queries": 24, "seed": 1},
                       retrieval={"legs": ["bm25"], "top_k": 10})
    data["sweep"] = {"retrieval.leg_params.bm25.k1": [0.3, 1.2, 2.0]}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["sweep", str(path), "--confirm-half", "--confirm-seed", "2"]) == 0
    out = capsys.readouterr().out
    assert "confirmation (chunk_ndcg_at_10)" in out and "where chosen" in out and "held back" in out
    from mlflow.tracking import MlflowClient

    parent, _, uri = out.split("MLflow parent run ")[1].splitlines()[0].partition(" in ")
    run = MlflowClient(uri).get_run(parent)
    assert {"confirm_selected_diff", "confirm_heldout_diff", "confirm_heldout_p"} <= set(run.data.metrics)
    report = next((tmp_path / "ws" / "sweeps").glob("*/report/report.md")).read_text()
    assert "## Confirmation on held-back queries" in report and "held back" in report
    assert main(["sweep", str(path), "--select-on", "test", "--confirm-on", "test"]) == 2
    # the demo set has one set of questions whatever dataset.split says: confirming on "train" is refused
    assert main(["sweep", str(path), "--no-report", "--select-on", "test", "--confirm-on", "train"]) == 2
    assert "same queries as split 'test'" in capsys.readouterr().err
