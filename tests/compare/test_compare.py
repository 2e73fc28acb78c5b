"""kbench compare on a real sweep: the table agrees with the significance functions on the runs' per-query
scores read back from MLflow, corrections span every comparison, the report and CLI work."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from kbench.cli import main
from kbench.compare import CompareError, RunScores, compare_runs, compare_scores
from kbench.compare import write_report
from kbench.evaluation.significance import holm, paired_t_test, randomization_test, wilcoxon_signed_rank
from kbench.sweep import expand_sweep, make_executor, run_sweep
from tests.conftest import link_shared_cache, make_config

pytestmark = pytest.mark.slow  # one real sweep of three configs, shared by the module

DEMO = {"name": "demo", "max_documents": 1, "max_queries": 20, "seed": 7}


@pytest.fixture(scope="module")
def sweep(shared_cache_workspace, tmp_path_factory):
    ws = tmp_path_factory.mktemp("compare-ws")
    link_shared_cache(ws, shared_cache_workspace)
    data = make_config(ws, dataset=DEMO, retrieval={"legs": ["vector"], "top_k": 20, "latency": "batch"})
    data["sweep"] = {"retrieval.top_k": [3, 20]}
    data["variants"] = [{"name": "big-chunks", "chunking.chunk_size": 1000, "chunking.chunk_overlap": 0}]
    out = run_sweep(expand_sweep(data), make_executor("local"), report=False, say=lambda s: None)
    assert set(out.status.values()) == {"ran"}
    return out


def test_sweep_comparison_matches_the_significance_functions(sweep):
    cmp = compare_runs(sweep.parent_run_id, tracking_uri=sweep.tracking_uri)
    assert cmp.baseline == "top_k=20"  # the config equal to the sweep's baseline
    assert [r.label for r in cmp.runs] == ["top_k=20", "top_k=3", "big-chunks"]
    assert cmp.metrics == ["chunk_ndcg_at_10", "chunk_recall_at_10", "chunk_mrr_at_10"]
    assert cmp.n_queries == 20
    for metric in cmp.metrics:
        a = cmp.scores("top_k=20", metric)
        for label in ("top_k=3", "big-chunks"):
            b = cmp.scores(label, metric)
            row = cmp.table[(cmp.table.config == label) & (cmp.table.metric == metric)].iloc[0]
            assert row["diff"] == pytest.approx(b.mean() - a.mean())
            assert row["p_t"] == pytest.approx(paired_t_test(a, b).p_value, nan_ok=True)
            assert row["p_wilcoxon"] == pytest.approx(wilcoxon_signed_rank(a, b).p_value)
            assert row["p_randomization"] == pytest.approx(randomization_test(a, b).p_value)
            assert row["diff_ci_low"] <= row["diff"] <= row["diff_ci_high"]
            assert row["wins"] + row["ties"] + row["losses"] == 20
    others = cmp.table[~cmp.table.baseline]
    np.testing.assert_allclose(others["p_adjusted"], holm(others["p_randomization"].to_numpy()))
    # top_k=3 can never find more than 3 results: its recall@10 cannot beat the baseline's
    row = cmp.table[(cmp.table.config == "top_k=3") & (cmp.table.metric == "chunk_recall_at_10")].iloc[0]
    assert row["diff"] <= 0 and row["wins"] == 0


def test_per_query_scores_are_the_logged_ones(sweep):
    cmp = compare_runs(sweep.parent_run_id, tracking_uri=sweep.tracking_uri, metrics=["doc_hit_rate_at_5"])
    from mlflow.tracking import MlflowClient

    client = MlflowClient(sweep.tracking_uri)
    for run in cmp.runs:
        logged = client.get_run(run.run_id).data.metrics["doc_hit_rate_at_5"]
        assert cmp.scores(run.label, "doc_hit_rate_at_5").mean() == pytest.approx(logged)


def test_run_ids_baseline_and_bonferroni(sweep):
    ids = [sweep.run_ids["big-chunks"], sweep.run_ids["top_k=3"]]
    cmp = compare_runs(ids, baseline=sweep.run_ids["top_k=3"], tracking_uri=sweep.tracking_uri,
                       correction="bonferroni", test="t")
    assert cmp.baseline == "top_k=3" and cmp.parent_run_id is None
    rows = cmp.table[~cmp.table.baseline]
    np.testing.assert_allclose(rows["p_adjusted"], np.minimum(1, rows["p_t"] * len(rows)))
    with pytest.raises(CompareError, match="baseline 'nope'"):
        compare_runs(ids, baseline="nope", tracking_uri=sweep.tracking_uri)
    with pytest.raises(CompareError, match="lack"):
        compare_runs(ids, metrics=["doc_ndcg_at_999"], tracking_uri=sweep.tracking_uri)


def test_report_files_and_cli(sweep, tmp_path, capsys):
    cmp = compare_runs(sweep.parent_run_id, tracking_uri=sweep.tracking_uri)
    out = write_report(cmp, tmp_path / "report")
    md = (out / "report.md").read_text()
    assert "## chunk_ndcg_at_10" in md and "top_k=3" in md and "holm correction over 6 comparisons" in md
    assert (out / "metric_per_config.png").stat().st_size > 5000
    assert list(out.glob("per_query_*.png"))
    assert "<table" in (out / "report.html").read_text()
    assert len(pd.read_csv(out / "comparison.csv")) == 9

    code = main(["compare", "--sweep", sweep.parent_run_id, "--tracking-uri", sweep.tracking_uri,
                 "--out", str(tmp_path / "cli"), "--log", "--metric", "chunk_recall_at_10"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "chunk_recall_at_10" in printed and "report:" in printed
    from mlflow.tracking import MlflowClient

    logged = [a.path for a in MlflowClient(sweep.tracking_uri).list_artifacts(sweep.parent_run_id, "report")]
    assert "report/report.md" in logged


def test_compare_needs_two_runs_on_shared_queries():
    one = RunScores("a", "a", pd.DataFrame({"m": [1.0, 0.0]}, index=pd.Index(["q1", "q2"], name="query_id")), "a")
    other = RunScores("b", "b", pd.DataFrame({"m": [1.0, 0.0]}, index=pd.Index(["x1", "x2"], name="query_id")), "b")
    with pytest.raises(CompareError, match="at least two runs"):
        compare_scores([one], metrics=["m"])
    with pytest.raises(CompareError, match="fewer than 2 query ids"):
        compare_scores([one, other], metrics=["m"])
