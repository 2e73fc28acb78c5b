"""kbench compare --sweep A --sweep B: two hand-built sweeps of the same configs on two sets in a real MLflow store;
the sets reverse each other's top, so the pick across them is never decided, and --log keeps the per-set lines on
one MLflow run."""
from __future__ import annotations

import json

import numpy as np
from mlflow.tracking import MlflowClient

from kbench.cli import main
from kbench.tracking import tags as tag
from tests.compare.test_sets import _hand_built_sweep

RNG = np.random.default_rng(31)
BASE_A, BASE_B = RNG.uniform(0.2, 0.6, 40), RNG.uniform(0.2, 0.6, 30)
HEADING = {"bm25": BASE_A + 0.1 + RNG.normal(0, 0.03, 40), "hybrid": BASE_A + RNG.normal(0, 0.03, 40),
           "vector": BASE_A - 0.15 + RNG.normal(0, 0.03, 40)}
ICT = {"bm25": BASE_B + RNG.normal(0, 0.03, 30), "hybrid": BASE_B + 0.1 + RNG.normal(0, 0.03, 30),
       "vector": BASE_B - 0.05 + RNG.normal(0, 0.03, 30)}


def test_compare_across_two_sweeps_reversing_the_top_is_never_decided_and_logs_the_per_set_lines(tmp_path, capsys):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment_id = client.create_experiment("across", artifact_location=str(tmp_path / "mlruns"))
    heading = _hand_built_sweep(client, experiment_id, "docs-heading", HEADING, tmp_path)
    ict = _hand_built_sweep(client, experiment_id, "docs-ict", ICT, tmp_path)
    out = tmp_path / "across"
    assert main(["compare", "--sweep", heading, "--sweep", ict, "--tracking-uri", uri, "--out", str(out), "--log"]) == 0
    printed = capsys.readouterr().out
    assert "Across 2 sets (docs-heading: 40 questions, docs-ict: 30 questions), 3 configs in every set, " \
           "chunk_ndcg_at_10" in printed
    assert "recommendation across sets: provisional: " in printed
    assert "the sets disagree on the top: docs-heading puts bm25 first; docs-ict puts hybrid first" in printed
    saved = json.loads((out / "across.json").read_text())
    assert saved["decided"] is False and saved["tops"] == {"docs-heading": "bm25", "docs-ict": "hybrid"}
    assert set(saved["per_set"]) == {"docs-heading", "docs-ict"} and saved["per_set"]["docs-ict"]["config"] == "hybrid"
    text = (out / "across.txt").read_text()
    assert f"docs-ict (sweep" not in text and "docs-ict: its own recommendation" in text
    logged = client.search_runs([experiment_id], f"tags.`{tag.SWEEP_ROLE}` = 'across'")
    assert len(logged) == 1
    run = logged[0]
    assert run.data.tags[tag.SWEEP_DECIDED] == "false" and run.data.tags[tag.SWEEP_WINNER] == saved["pick"]
    assert json.loads(run.data.tags[tag.SWEEP_SETS]) == {"docs-heading": heading, "docs-ict": ict}
    note = run.data.tags[tag.MLFLOW_NOTE]
    assert note.startswith(f"**Recommended across 2 sets (provisional): {saved['pick']}**")
    assert f"docs-heading (sweep {heading}): its own recommendation" in note and "recommendation: bm25" in note
    assert run.data.metrics["recommendation_bound"] == saved["worst"][saved["pick"]]
    # the same sweep twice, a run that is no sweep parent, flags of a one-sweep comparison: one line, exit 2
    assert main(["compare", "--sweep", heading, "--sweep", heading, "--tracking-uri", uri]) == 2
    assert "names the same sweep twice" in capsys.readouterr().err
    child = client.search_runs([experiment_id], f"tags.`{tag.SWEEP_LABEL}` = 'bm25'")[0].info.run_id
    assert main(["compare", "--sweep", heading, "--sweep", child, "--tracking-uri", uri]) == 2
    assert f"--sweep {child} is not a sweep's parent run" in capsys.readouterr().err
    assert main(["compare", "--sweep", heading, "--sweep", ict, "--frontier", "chunk_ndcg_at_10",
                 "--tracking-uri", uri]) == 2
    assert "--frontier compare one sweep" in capsys.readouterr().err
