"""kbench compare on a real sweep: the table agrees with the significance functions on the runs' per-query
scores read back from MLflow, corrections span every comparison, the report and CLI work."""
from __future__ import annotations

import base64
import re

import numpy as np
import pandas as pd
import pytest

from kbench.cli import main
from kbench.compare import CompareError, RunScores, compare_runs, compare_scores
from kbench.compare import summary_lines, write_report
from kbench.compare.recommendation import recommend_comparison
from kbench.config import RecommendConfig
from kbench.compare.report import differences
from kbench.evaluation.significance import holm, paired_t_test, randomization_test, wilcoxon_signed_rank
from kbench.sweep import expand_sweep, make_executor, run_sweep
from tests.conftest import link_shared_cache, make_config

pytestmark = pytest.mark.slow  # one real sweep of three configs, shared by the module

DEMO = {"name": "demo", "max_documents": 1, "max_queries": 20, "seed": 7}


@pytest.fixture(scope="module")
def sweep(shared_cache_workspace, tmp_path_factory):
    ws = tmp_path_factory.mktemp("compare-ws")
    link_shared_cache(ws, shared_cache_workspace)
    data = make_config(ws, dataset=DEMO, retrieval={"legs": ["vector"], "top_k": 20, "latency": "batch"},
                       evaluation={"k": [1, 5, 10], "slices": ["query_length"]})
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
    said = capsys.readouterr()
    printed = said.out
    assert "chunk_recall_at_10" in printed and "report:" in printed
    # issue 42 item 13: 33 s with no progress; now a line per run read and per config tested, on stderr
    assert "  read 3/3 runs' per-question scores (" in said.err and " configs against " in said.err
    assert re.search(r"  testing [23]/3 configs against \S+ on 1 metrics", said.err)
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


def test_ranking_orders_configs_and_tests_each_against_the_best(sweep):
    cmp = compare_runs(sweep.parent_run_id, tracking_uri=sweep.tracking_uri)
    assert cmp.headline == "chunk_ndcg_at_10"  # nDCG@10 of the finest level
    for metric in cmp.metrics:
        ranking = cmp.ranking(metric)
        means = {r.label: cmp.scores(r.label, metric).mean() for r in cmp.runs}
        assert list(ranking["rank"]) == list(range(1, len(cmp.runs) + 1))
        np.testing.assert_allclose(ranking["mean"], sorted(means.values(), reverse=True))
        best = ranking.iloc[0]
        assert best["vs_best"] == "best" and means[best["config"]] == max(means.values())
        others = ranking.iloc[1:]
        a = cmp.scores(best["config"], metric)
        p = np.array([randomization_test(a, cmp.scores(c, metric)).p_value for c in others["config"]])
        np.testing.assert_allclose(others["p_vs_best"], p)
        np.testing.assert_allclose(others["p_vs_best_adjusted"], holm(p))
        assert list(others["vs_best"]) == ["worse" if q < cmp.alpha else "tied" for q in holm(p)]
        assert (others["diff_to_best"] <= 0).all()
    assert cmp.best == cmp.ranking().iloc[0]["config"]


def _scores(label: str, values, knobs: str = "") -> RunScores:
    index = pd.Index([f"q{i:02d}" for i in range(len(values))], name="query_id")
    return RunScores(label, f"id-{label}", pd.DataFrame({"m": values}, index=index), f"id-{label}", knobs)


def test_significant_differences_are_split_into_better_and_worse():
    rng = np.random.default_rng(3)
    base = rng.uniform(0.2, 0.6, 16)
    runs = [_scores("base", base, "baseline"), _scores("down", base - 0.15 - rng.uniform(0, 0.05, 16)),
            _scores("same", base + rng.normal(0, 0.01, 16)), _scores("up", base + 0.3 + rng.uniform(0, 0.05, 16))]
    cmp = compare_scores(runs, metrics=["m"])
    better, worse = differences(cmp)
    assert [line.split(":")[0] for line in better] == ["up"] and "+0.3" in better[0]
    assert [line.split(":")[0] for line in worse] == ["down"] and "m -0.1" in worse[0]
    lines = summary_lines(cmp)
    assert lines.index("Significantly better than the baseline (base):") < lines.index(
        "Significantly worse than the baseline (base):")
    ranking = cmp.ranking()
    assert ranking.iloc[0]["config"] == "up" and ranking.iloc[-1]["config"] == "down"
    assert (ranking.iloc[1:]["vs_best"] == "worse").all()  # every other config is far below "up"
    tied = compare_scores([_scores("a", base, "baseline"), _scores("b", base + rng.normal(0, 0.01, 16))],
                          metrics=["m"])
    assert list(tied.ranking()["vs_best"]) == ["best", "tied"]
    assert summary_lines(tied)[0].startswith("No difference to the baseline (a) is significant")


def test_report_html_is_self_contained_and_opens_with_the_ranking(sweep, tmp_path):
    cmp = compare_runs(sweep.parent_run_id, tracking_uri=sweep.tracking_uri)
    out = write_report(cmp, tmp_path / "report")
    page = (out / "report.html").read_text(encoding="utf-8")
    links = re.findall(r"""\b(?:src|href|srcset|data)\s*=\s*["']([^"']*)""", page, flags=re.I)
    assert len(links) == 2  # the two plots, and nothing else pointing anywhere
    assert all(link.startswith("data:image/png;base64,") for link in links), [link[:40] for link in links]
    assert "url(" not in page and "@import" not in page
    embedded = {base64.b64decode(link.split(",", 1)[1]) for link in links}
    assert (out / "metric_per_config.png").read_bytes() in embedded
    (scatter,) = out.glob("per_query_*.png")
    assert scatter.read_bytes() in embedded
    headings = re.findall(r"<h2>(.*?)</h2>", page)
    assert headings[0] == f"Ranking on {cmp.headline}"
    assert headings[1].startswith("Significant differences to the baseline")
    # the ranking table lists the configs best first, in the markdown too
    md = (out / "report.md").read_text(encoding="utf-8")
    assert md.index("## Ranking on") < md.index("## Significant differences") < md.index("## chunk_ndcg_at_10")
    section = md[md.index("## Ranking on"):md.index("## Significant differences")]
    rows = [row for row in section.splitlines() if row.startswith("| ")][1:]  # below the header
    ranked = [row.split(" | ")[1].removesuffix(" (baseline)") for row in rows]
    assert ranked == list(cmp.ranking()["config"])
    if cmp.best != cmp.baseline:  # the plot of per-query scores shows the best config against the baseline
        assert scatter.name == f"per_query_{cmp.best}.png"


def test_compare_cli_sorts_by_the_metric_and_marks_the_best(sweep, tmp_path, capsys):
    assert main(["compare", "--sweep", sweep.parent_run_id, "--tracking-uri", sweep.tracking_uri,
                 "--out", str(tmp_path / "cli")]) == 0
    printed = capsys.readouterr().out
    blocks = printed.split("\n\n")
    cmp = compare_runs(sweep.parent_run_id, tracking_uri=sweep.tracking_uri)
    found = recommend_comparison(cmp)  # a sweep run by run_sweep: it recommends by the defaults
    assert "\n".join(found.lines()) in printed and printed.index("recommendation: ") < printed.index("report: ")
    overview = blocks[0].splitlines()
    assert overview[0].split()[2:] == cmp.metrics
    rows = [re.split(r"\s{2,}", line.strip()) for line in overview[2:2 + len(cmp.runs)]]
    assert [int(r[0]) for r in rows] == list(range(1, len(cmp.runs) + 1))
    assert [r[1].removesuffix(" (baseline)") for r in rows] == list(cmp.ranking()["config"])
    headline = [float(r[2].split()[0]) for r in rows]
    assert headline == sorted(headline, reverse=True)
    for column, metric in enumerate(cmp.metrics, start=2):
        marked = [r[1].removesuffix(" (baseline)") for r in rows if r[column].endswith("*")]
        assert marked == [cmp.ranking(metric).iloc[0]["config"]]
    for metric, block in zip(cmp.metrics, blocks[1:]):  # one table per metric, best first
        lines = block.strip("\n").splitlines()
        assert lines[0].split()[1] == metric
        means = [float(re.split(r"\s{2,}", line.strip())[2]) for line in lines[2:]]
        assert means == sorted(means, reverse=True)
        assert re.split(r"\s{2,}", lines[2].strip())[5] == "best"


def test_compare_cli_recommends_by_the_margin_guards_cost_and_budget_given(sweep, tmp_path, capsys):
    out = tmp_path / "guarded"
    assert main(["compare", "--sweep", sweep.parent_run_id, "--tracking-uri", sweep.tracking_uri, "--out", str(out),
                 "--guard", "recall_at_10", "--recommend-cost", "cost_embed_seconds", "--margin", "2%",
                 "--latency-budget-ms", "1000"]) == 0
    printed = capsys.readouterr().out
    cmp = compare_runs(sweep.parent_run_id, tracking_uri=sweep.tracking_uri)
    found = recommend_comparison(cmp, RecommendConfig(guards=["recall_at_10"], cost="cost_embed_seconds",
                                                      margin="2%", latency_budget_ms=1000))
    assert found.metrics == [cmp.headline, "chunk_recall_at_10"] and found.cost == "cost_embed_seconds"
    assert found.margin == "2%" and found.budgets == ["p95 latency of total at most 1000 ms"]
    assert "\n".join(found.lines()) in printed
    assert "## Recommendation\n\n- " + found.lines()[0] in (out / "report.md").read_text()
    for bad in (["--guard", "nDCG@10"], ["--guard", "latency_ms_total_p95"], ["--margin", "two"]):
        with pytest.raises(SystemExit) as exit_:  # a user error: one line and exit 2, from the CLI's one handler
            main(["compare", "--sweep", sweep.parent_run_id, "--tracking-uri", sweep.tracking_uri, "--out", str(out),
                  *bad])
        assert exit_.value.code == 2
        assert capsys.readouterr().err.splitlines()[-1].startswith("kbench: error: --margin / --guard / --recommend-cost / "
                                                  "--latency-budget-ms: ")


def test_compare_cli_ranks_a_latency_fastest_first_and_accepts_its_p95(sweep, tmp_path, capsys):
    assert main(["compare", "--sweep", sweep.parent_run_id, "--tracking-uri", sweep.tracking_uri,
                 "--out", str(tmp_path / "latency"), "--metric", "latency_ms_total", "--metric",
                 "latency_ms_total_p95", "--metric", "chunk_ndcg_at_10"]) == 0
    printed = capsys.readouterr().out
    cmp = compare_runs(sweep.parent_run_id, tracking_uri=sweep.tracking_uri,
                       metrics=["latency_ms_total", "latency_ms_total_p95", "chunk_ndcg_at_10"])
    for metric, value in (("latency_ms_total", np.mean), ("latency_ms_total_p95", lambda x: np.percentile(x, 95))):
        ranking = cmp.ranking(metric)
        values = {label: value(cmp.scores(label, "latency_ms_total")) for label in ranking["config"]}
        assert list(ranking["mean"]) == pytest.approx(sorted(values.values()))  # the fastest first
        assert (ranking["diff_to_best"] >= 0).all()
    overview = printed.split("\n\n")[0].splitlines()
    fastest = cmp.ranking("latency_ms_total").iloc[0]["config"]
    row = next(line for line in overview if re.search(rf"\b{re.escape(fastest)}\b", line))
    assert re.split(r"\s{2,}", row.strip())[2].endswith("*")  # the fastest marked best on latency
    found = recommend_comparison(cmp)  # ranked on a latency, still recommended by quality
    assert found.headline == "chunk_ndcg_at_10" and "\n".join(found.lines()) in printed


def test_latency_and_cost_are_lower_is_better_everywhere_compare_says_better():
    index = pd.Index([f"q{i:02d}" for i in range(30)], name="query_id")
    rng = np.random.default_rng(12)
    base_ms = rng.gamma(2.0, 2.0, 30)
    runs = [RunScores(label, f"id-{label}", pd.DataFrame({"latency_ms_total": base_ms * factor,
                                                           "chunk_ndcg_at_10": rng.uniform(0, 1, 30)}, index=index),
                      f"id-{label}", "baseline" if label == "slow" else "")
            for label, factor in (("slow", 3.0), ("fast", 1.0))]
    cmp = compare_scores(runs, metrics=["latency_ms_total", "latency_ms_total_p95"], test="t")
    assert list(cmp.ranking("latency_ms_total")["config"]) == ["fast", "slow"]
    assert list(cmp.ranking("latency_ms_total_p95")["config"]) == ["fast", "slow"]
    row = cmp.table[(cmp.table.config == "fast") & (cmp.table.metric == "latency_ms_total")].iloc[0]
    assert row["diff"] < 0 and row["wins"] == 30 and row["losses"] == 0  # 30 questions faster: 30 better
    p95 = cmp.table[(cmp.table.config == "fast") & (cmp.table.metric == "latency_ms_total_p95")].iloc[0]
    assert p95["mean"] == pytest.approx(np.percentile(base_ms, 95))
    assert np.isnan(p95["p_t"]) and p95["p_randomization"] < 0.05 and p95["significant"]
    assert any("a percentile, tested by the paired permutation test" in n for n in cmp.notes)
    better, worse = differences(cmp)
    assert len(better) == 2 and not worse and all(line.startswith("fast: latency_ms_total") for line in better)


def test_cli_frontier_constraint_slices_and_fdr(sweep, tmp_path, capsys):
    out = tmp_path / "cli"
    assert main(["compare", "--sweep", sweep.parent_run_id, "--tracking-uri", sweep.tracking_uri, "--out", str(out),
                 "--correction", "fdr_bh", "--slice", "query_length", "--frontier", "chunk_ndcg_at_10",
                 "--cost", "latency_ms_total_p95", "--constraint", "cost_index_bytes<1e12"]) == 0
    printed = capsys.readouterr().out
    assert "fdr_bh correction" in printed and "per query_length" in printed and "best under" in printed
    frontier = pd.read_csv(out / "frontier.csv")
    assert len(frontier) == 3 and frontier["on_frontier"].any() and (out / "frontier.png").stat().st_size > 5000
    sliced = pd.read_csv(out / "slices_query_length.csv")
    assert set(sliced["slice"]) <= {"short", "medium", "long"} and sliced["p_adjusted"].notna().any()
    assert "## Minimum detectable difference" in (out / "report.md").read_text()
    with pytest.raises(SystemExit) as exit_:  # a user error: one line and exit 2, from the CLI's one handler
        main(["compare", "--sweep", sweep.parent_run_id, "--tracking-uri", sweep.tracking_uri,
              "--out", str(out), "--frontier", "chunk_ndcg_at_10", "--cost", "no_such_cost"])
    assert exit_.value.code == 2 and "no run metric 'no_such_cost'" in capsys.readouterr().err
