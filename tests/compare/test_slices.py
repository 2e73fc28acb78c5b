"""Comparisons per slice on hand-built per-query scores: each slice tested alone, corrected together."""
from __future__ import annotations

import numpy as np
import pandas as pd

from kbench.compare import RunScores, compare_scores
from kbench.compare.compare import detectable_differences
from kbench.compare.slices import compare_by_slice
from kbench.evaluation.significance import adjust_p_values, minimum_detectable_difference, paired_t_test


def runs():
    rng = np.random.default_rng(3)
    ids = [f"q{i:02d}" for i in range(40)]
    kind = ["docs"] * 24 + ["code"] * 16
    base = rng.random(40)
    better_on_docs = base + np.where(np.array(kind) == "docs", 0.2, -0.1) + rng.normal(0, 0.05, 40)
    frame = lambda x: pd.DataFrame({"m": x, "slice_doc_type": kind}, index=pd.Index(ids, name="query_id"))
    return [RunScores("base", "r1", frame(base), "r1"), RunScores("fusion", "r2", frame(better_on_docs), "r2")]


def test_each_slice_is_tested_on_its_queries_and_corrected_as_one_family():
    table = compare_by_slice(runs(), "doc_type", metrics=["m"], test="t", correction="holm")
    other = table[~table["baseline"]].set_index("slice")
    a, b = runs()
    for label in ("docs", "code"):
        keep = a.per_query["slice_doc_type"] == label
        want = paired_t_test(a.per_query.loc[keep, "m"], b.per_query.loc[keep, "m"]).p_value
        assert np.isclose(other.loc[label, "p_t"], want)
        assert other.loc[label, "n_queries"] == keep.sum()
    np.testing.assert_allclose(table["p_adjusted"], adjust_p_values(table["p_t"].to_numpy(), "holm"))
    assert other.loc["docs", "diff"] > 0 > other.loc["code", "diff"]  # helps docs, hurts code: one table


def test_mde_in_the_comparison_is_the_power_formula_on_the_differences():
    a, b = runs()
    cmp = compare_scores([a, b], metrics=["m"], test="t")
    d = b.per_query["m"].to_numpy() - a.per_query["m"].to_numpy()
    want = minimum_detectable_difference(d.std(ddof=1), 40, 0.05)
    row = detectable_differences(cmp).iloc[0]
    assert np.isclose(row["mde"], want) and row["n_queries"] == 40


def language_runs(codes: list[str]):
    rng = np.random.default_rng(5)
    ids = [f"q{i:02d}" for i in range(len(codes))]
    base = rng.random(len(codes))
    frame = lambda x: pd.DataFrame({"doc_ndcg_at_10": x, "slice_language": codes}, index=pd.Index(ids, name="query_id"))
    return [RunScores("minilm", "r1", frame(base), "r1"),
            RunScores("bm25", "r2", frame(base + rng.normal(0.05, 0.1, len(codes))), "r2")]


def test_the_language_slice_is_compared_and_reported_when_two_languages_hold_a_share(tmp_path):
    from kbench.compare.report import write_report
    from kbench.compare.slices import language_table, meaningful_languages

    mixed = compare_scores(language_runs(["fr"] * 15 + ["en"] * 23 + ["und"] * 2), metrics=["doc_ndcg_at_10"],
                           test="t", n_resamples=200, n_bootstrap=200)
    assert meaningful_languages(mixed.runs) == ["en", "fr"]  # und is never a language of its own
    table = language_table(mixed)
    assert set(table["slice"]) == {"en", "fr"}
    assert table.set_index(["slice", "config"]).loc[("fr", "bm25"), "n_queries"] == 15
    md = (write_report(mixed, tmp_path / "mixed") / "report.md").read_text(encoding="utf-8")
    assert "## doc_ndcg_at_10 per language" in md and "| fr | bm25 | 15 |" in md
    assert (tmp_path / "mixed" / "slices_language.csv").is_file()
    # 4 French questions among 40 are no slice of their own; one language: nothing to split, nothing reported
    for codes in (["fr"] * 4 + ["en"] * 36, ["en"] * 40):
        alone = compare_scores(language_runs(codes), metrics=["doc_ndcg_at_10"], test="t", n_resamples=200,
                               n_bootstrap=200)
        assert language_table(alone) is None
        md = (write_report(alone, tmp_path / "alone") / "report.md").read_text(encoding="utf-8")
        assert "per language" not in md
