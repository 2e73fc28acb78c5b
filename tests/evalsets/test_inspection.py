"""kbench datasets inspect: coverage, Gini, leakage, saturation and the MDE, by hand and on the demo set."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from kbench.cli import main as kbench_main
from kbench.compare.compare import RunScores
from kbench.evalsets import inspect_dataset, minimum_detectable_difference
from kbench.evalsets.inspection import gini
from kbench.evaluation import significance
from kbench.records import Dataset, Document, Query, Span


def test_gini_by_hand():
    assert gini([5, 5, 5, 5]) == 0
    assert gini([0, 0, 0, 8]) == pytest.approx(0.75)  # (n-1)/n: everything on one document
    assert gini([1, 2, 3]) == pytest.approx(2 / 9)  # sum |xi-xj| / (2 n^2 mean) = 8 / (2 * 9 * 2)
    assert gini([]) == 0


def test_mde_is_the_comparison_reports_figure():
    # one function for `kbench compare` and `datasets inspect`: the exact paired t-test MDE, a little above
    # the normal approximation (z(0.975) + z(0.8)) * sd / sqrt(n) at small n, and equal to it as n grows
    assert minimum_detectable_difference is significance.minimum_detectable_difference
    normal = (norm.ppf(0.975) + norm.ppf(0.8)) * 0.3 / np.sqrt(20)
    assert minimum_detectable_difference(0.3, 20) > normal
    assert minimum_detectable_difference(0.3, 20000) == pytest.approx((norm.ppf(0.975) + norm.ppf(0.8)) * 0.3
                                                                      / np.sqrt(20000), rel=1e-3)


def small_dataset() -> Dataset:
    docs = [Document("a.md", "Cats purr when content. They also knead blankets.\n\nCats sleep sixteen hours."),
            Document("b.md", "Dogs bark at strangers and wag their tails."),
            Document("c.md", "Parrots mimic human speech surprisingly well.")]
    queries = [Query("q1", "why do cats purr"), Query("q2", "Why do cats purr?"), Query("q3", "do dogs bark")]
    spans = {"q1": [Span("a.md", 0, 23)], "q2": [Span("a.md", 0, 23)], "q3": [Span("b.md", 0, 24)]}
    return Dataset("small", docs, queries, spans=spans)


def test_inspection_by_hand():
    result = inspect_dataset(small_dataset())
    assert result.questions == 3 and result.documents_with_question == 2
    assert result.gini_questions_per_document == pytest.approx(gini([2, 1, 0]))
    assert result.near_duplicates == 1  # q2 repeats q1
    assert result.span_chars["p50"] == 23
    assert result.leakage_rank == {"1": 3}
    assert result.leakage_overlap == {">=0.8": 3}  # cats purr / dogs bark: every content word is in the span
    assert result.metrics()["coverage_documents"] == pytest.approx(2 / 3)
    # what it means: every gold passage is BM25's first (strongly lexical), 2 of 3 documents asked, one repeat
    reading = result.reading()
    assert reading[0].startswith("strongly lexical: BM25 alone ranks the gold passage first for 100% of the "
                                 "questions (word overlap with the reference 1.00 on average)")
    assert reading[1] == (f"spread: 67% of the documents have a question (Gini {gini([2, 1, 0]):.2f}); no few "
                          "documents decide the ranking")
    assert reading[2].startswith("1 near-duplicate questions (33%)") and len(reading) == 3  # median 4 words: not short
    # every question shown (fewer than five), each with where its reference is and its text
    assert result.samples == [
        {"question_id": "q1", "question": "why do cats purr", "reference": "a.md [0:23]: Cats purr when content."},
        {"question_id": "q2", "question": "Why do cats purr?", "reference": "a.md [0:23]: Cats purr when content."},
        {"question_id": "q3", "question": "do dogs bark", "reference": "b.md [0:24]: Dogs bark at strangers a"}]


def test_reading_of_a_spread_set_without_leakage_and_of_runs():
    fruit = ["apple", "banana", "cherry", "damson"]
    docs = [Document(f"d{i}.md", f"This page covers the {fruit[i]} harvest in depth.") for i in range(4)]
    # each question names the fruit of the next document: BM25 ranks another passage above its gold one
    asked = ["when does the {} season start this year", "which regions grow {} commercially today"]
    queries = [Query(f"q{i}", asked[i // 4].format(fruit[(i + 1) % 4])) for i in range(8)]
    spans = {f"q{i}": [Span(f"d{i % 4}.md", 0, 10)] for i in range(8)}
    frame = lambda values: pd.DataFrame({"doc_ndcg_at_10": values}, index=[f"q{i}" for i in range(8)])  # noqa: E731
    runs = [RunScores("A", "a", frame([1, 1, 0, .5, .2, .3, .9, .1]), "a"),
            RunScores("B", "b", frame([1, 1, 0, .4, .3, .1, .8, .3]), "b")]
    result = inspect_dataset(Dataset("spread", docs, queries, spans=spans), runs)
    reading = result.reading()
    assert result.leakage_rank.get("1", 0) == 0 and result.leakage_mean_overlap < 0.6
    assert reading[0].startswith("little lexical leakage: BM25 alone ranks the gold passage first for 0% of the "
                                 "questions")
    assert reading[1].startswith("spread: 100% of the documents have a question (Gini 0.00)")
    assert result.near_duplicates == 0
    assert reading[2] == ("3 of 8 questions (38%) get the same doc_ndcg_at_10 from every run (all right or all "
                          "wrong): they cannot separate configs; 5 do the work")
    assert reading[3] == (f"a gap in doc_ndcg_at_10 below {result.mde:.4f} is likely missed (80% power): read a "
                          "winner ahead by less as a tie")
    assert [s["question_id"] for s in result.samples] == ["q0", "q2", "q4", "q5", "q7"]  # spread, first and last
    # the same gold passages, asked with their own words, which every passage holds: lexical, and still ambiguous
    generic = [Query(f"q{i}", "this page covers the harvest in depth") for i in range(2)]
    result = inspect_dataset(Dataset("generic", docs, generic, spans={f"q{i}": [Span(f"d{i}.md", 0, len(docs[i].text))]
                                                                      for i in range(2)}))
    assert result.leakage_mean_overlap >= 0.6 and result.leakage_rank.get("1", 0) < 2 * 0.25
    assert result.reading()[0].startswith("lexical but ambiguous: BM25 alone ranks the gold passage first for ")


def test_saturation_and_mde_from_runs():
    frame = lambda values: pd.DataFrame({"chunk_ndcg_at_10": values}, index=["q1", "q2", "q3"])  # noqa: E731
    runs = [RunScores("A", "a", frame([1.0, 0.0, 0.5]), "a"), RunScores("B", "b", frame([1.0, 0.0, 0.2]), "b"),
            RunScores("C", "c", frame([1.0, 0.0, 0.9]), "c")]
    result = inspect_dataset(small_dataset(), runs)
    assert result.metric == "chunk_ndcg_at_10"
    assert result.saturated_all_right == 1 and result.saturated_all_wrong == 1
    sds = [np.std(np.array(x) - np.array(y), ddof=1) for x, y in
           [([1, 0, .5], [1, 0, .2]), ([1, 0, .5], [1, 0, .9]), ([1, 0, .2], [1, 0, .9])]]
    assert result.sd_difference == pytest.approx(np.median(sds))
    assert result.mde == pytest.approx(minimum_detectable_difference(np.median(sds), 3))


def test_cli_prints_and_logs_the_demo_set(tmp_path, capsys):
    assert kbench_main(["datasets", "inspect", "demo", "--workspace", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "documents with a question" in out and "32 of 32" in out and "Gini" in out
    assert "what it means for comparing configs:\n  - somewhat lexical: BM25 alone ranks the gold passage first " \
           "for 49% of the questions" in out
    samples = out.split("5 sample questions (spread over the set) and their references:\n")[1].splitlines()
    assert samples[0].startswith("  q001: ") and samples[1].startswith("      -> getting-started/overview.md [")
    assert [line.split(":")[0].strip() for line in samples[0:10:2]] == ["q001", "q025", "q049", "q074", "q098"]
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = client.search_runs([client.get_experiment_by_name("datasets-inspect").experiment_id])[0]
    assert run.data.metrics["questions"] == 98 and run.data.params["dataset.name"] == "demo"
    assert "inspect.json" in [a.path for a in client.list_artifacts(run.info.run_id)]
