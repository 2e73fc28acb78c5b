"""A grid sweep's factor effects: levels from the grid's labels, computed from the children's per-query scores,
shown at the end, logged to MLflow on the parent and appended to the report."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from mlflow.tracking import MlflowClient

from kbench.cli import main
from kbench.compare import compare_runs
from kbench.sweep.expand import grid_factors
from tests.sweep.test_sweep import sweep_data


def test_grid_factors_name_levels_by_their_label_parts():
    levels, factors = grid_factors({"chunking.chunk_size": [300, 600], "retrieval.legs": [["bm25"], ["vector", "bm25"]],
                                    "chunking": [{"strategy": "fixed"}, {"strategy": "markdown"}]})
    assert factors == {"chunk_size": ["300", "600"], "legs": ["[bm25]", "[vector,bm25]"],
                       "chunking": ["fixed", "markdown"]}
    assert levels["chunk_size=600,legs=[bm25],chunking=markdown"] == {"chunk_size": "600", "legs": "[bm25]",
                                                                      "chunking": "markdown"}
    assert len(levels) == 8


def test_grid_sweep_reports_and_logs_factor_effects(workspace, tmp_path, capsys):
    data = sweep_data(workspace, retrieval={"legs": ["bm25"], "top_k": 10},
                      sweep={"chunking.chunk_size": [300, 900], "retrieval.leg_params.bm25.k1": [0.5, 1.5]})
    config = tmp_path / "sweep.yaml"
    config.write_text(yaml.safe_dump(data))
    assert main(["sweep", str(config), "--quiet"]) == 0
    out = capsys.readouterr().out
    parent_id = re.search(r"MLflow parent run (\w+)", out).group(1)
    client = MlflowClient(f"sqlite:///{workspace / 'mlflow.db'}")
    cmp = compare_runs(parent_id, tracking_uri=str(client.tracking_uri))
    s = {run.label: run.per_query["chunk_ndcg_at_10"].to_numpy(float) for run in cmp.runs}
    # chunk_size 300 -> 900, averaged over k1, by hand from the children's per-query scores
    main_chunk = ((s["chunk_size=900,k1=0.5"] + s["chunk_size=900,k1=1.5"]) / 2
                  - (s["chunk_size=300,k1=0.5"] + s["chunk_size=300,k1=1.5"]) / 2).mean()
    interaction = ((s["chunk_size=900,k1=1.5"] - s["chunk_size=300,k1=1.5"])
                   - (s["chunk_size=900,k1=0.5"] - s["chunk_size=300,k1=0.5"])).mean()
    assert f"chunk_size 300 -> 900: {main_chunk:+.4f}" in out
    assert f"chunk_size x k1 300 -> 900 x 0.5 -> 1.5: {interaction:+.4f}" in out
    parent = client.get_run(parent_id)
    assert parent.data.metrics["effect_main.chunk_size.300_to_900"] == pytest.approx(main_chunk, abs=1e-9)
    assert parent.data.metrics["effect_interaction.chunk_size_x_k1.300_to_900_x_0.5_to_1.5"] == pytest.approx(
        interaction, abs=1e-9)
    logged = json.loads(Path(client.download_artifacts(parent_id, "factor_effects.json", str(tmp_path))).read_text())
    assert logged["metric"] == "chunk_ndcg_at_10" and len(logged["effects"]) == 2 + 2 + 1
    report = next((workspace / "sweeps").glob("*/report/report.md")).read_text()
    assert "## Factor effects on chunk_ndcg_at_10" in report
    assert np.isfinite(main_chunk)
