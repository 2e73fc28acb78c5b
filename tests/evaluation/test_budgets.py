"""Budget metrics against a brute-force oracle: characters as Python sets, the budget walked by hand."""
from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from kbench.evaluation.budgets import budget_metric_row, chunks_within_budget
from kbench.records import Chunk, Span

DOCS = ("a", "b", "c")


@st.composite
def ranking_case(draw):
    """A ranking of 0-8 chunks over three 60-character documents, their token counts, 1-3 reference spans."""
    chunks = []
    for n in range(draw(st.integers(0, 8))):
        doc = draw(st.sampled_from(DOCS))
        start = draw(st.integers(0, 59))
        end = draw(st.integers(start + 1, 60))
        chunks.append(Chunk(doc, n, start, end, "x" * (end - start)))
    tokens = {c.chunk_id: draw(st.integers(1, 40)) for c in chunks}
    spans = []
    for _ in range(draw(st.integers(1, 3))):
        start = draw(st.integers(0, 59))
        spans.append(Span(draw(st.sampled_from(DOCS)), start, draw(st.integers(start + 1, 60))))
    relevant = set(draw(st.lists(st.sampled_from(DOCS), max_size=3)))
    budgets = sorted(set(draw(st.lists(st.integers(1, 120), min_size=1, max_size=4))))
    return chunks, tokens, spans, relevant, budgets


def oracle(chunks, tokens, spans, relevant, budget):
    kept, spent = [], 0
    for c in chunks:  # the definition, walked literally: stop at the first chunk that would overflow
        if spent + tokens[c.chunk_id] > budget:
            break
        spent += tokens[c.chunk_id]
        kept.append(c)
    got = {(c.doc_id, i) for c in kept for i in range(c.start, c.end)}
    ref = {(s.doc_id, i) for s in spans for i in range(s.start, s.end)}
    return {
        "doc": len(relevant & {c.doc_id for c in kept}) / len(relevant) if relevant else math.nan,
        "recall": len(got & ref) / len(ref),
        "precision": len(got & ref) / len(got) if got else 0.0,
    }


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, abs_tol=1e-12)


@settings(max_examples=300, deadline=None)
@given(ranking_case())
def test_budget_metrics_match_the_brute_force_oracle(case):
    chunks, tokens, spans, relevant, budgets = case
    row = budget_metric_row(chunks, tokens, budgets, spans, relevant)
    for n in budgets:
        want = oracle(chunks, tokens, spans, relevant, n)
        assert same(row[f"doc_recall_at_budget_{n}"], want["doc"])
        assert same(row[f"span_recall_at_budget_{n}"], want["recall"])
        assert same(row[f"span_precision_at_budget_{n}"], want["precision"])


def test_the_walk_stops_at_the_first_chunk_that_does_not_fit():
    assert chunks_within_budget([300, 300, 100], 500) == 1  # the 100-token chunk after it is not taken
    assert chunks_within_budget([300, 200, 1], 500) == 2  # exactly the budget
    assert chunks_within_budget([600, 10], 500) == 0  # a first chunk larger than the budget keeps nothing
    assert chunks_within_budget([], 500) == 0


def test_a_long_chunker_no_longer_wins_by_being_long():
    """One 2,000-character chunk holding the answer against four 500-character chunks, the answer in the first:
    top-1 recall ties them, a 150-token budget keeps only the short one."""
    answer = [Span("a", 100, 200)]
    long = [Chunk("a", 9, 0, 2000, "x")]  # another chunking of the same document
    short = [Chunk("a", i, 500 * i, 500 * (i + 1), "x") for i in range(4)]
    tokens = {long[0].chunk_id: 500, **{c.chunk_id: 125 for c in short}}
    assert budget_metric_row(long, tokens, [150], answer, {"a"})["span_recall_at_budget_150"] == 0.0
    row = budget_metric_row(short, tokens, [150], answer, {"a"})
    assert row["span_recall_at_budget_150"] == 1.0 and row["span_precision_at_budget_150"] == 100 / 500


def test_document_qrels_datasets_get_doc_recall_only():
    chunks = [Chunk("a", 0, 0, 10, "x"), Chunk("b", 0, 0, 10, "x")]
    row = budget_metric_row(chunks, {"a#0": 5, "b#0": 5}, [5, 10], None, {"b"})
    assert row == {"doc_recall_at_budget_5": 0.0, "doc_recall_at_budget_10": 1.0}


# ------------------------------------------------------------------ issue 53 item 4: one tokenizer, every model
def test_every_catalogue_model_passes_a_dry_run_with_budgets_and_a_model_without_a_tokenizer_is_refused(tmp_path,
                                                                                                        capsys):
    """Budget tokens are counted by one tokenizer whatever the embedding model, so every catalogue model installed
    here passes a sweep's --dry-run with budgets (two of five used to fail after embedding and search); naming a
    budget_tokenizer that has none fails the dry run with the knob and what works."""
    import yaml

    from kbench.cli import main
    from kbench.embedding.models import CATALOGUE

    installed = [name for name, spec in CATALOGUE.items() if spec.locate() is not None]
    assert {"all-MiniLM-L6-v2", "paraphrase-MiniLM-L3-v2", "wordllama-l2-supercat"} <= set(installed)
    sweep = {"name": "budgets", "workspace": str(tmp_path / "ws"), "dataset": {"name": "demo", "max_queries": 5},
             "retrieval": {"legs": ["vector"]}, "evaluation": {"budgets": [250, 500]},
             "sweep": {"embedding.model": installed}}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep), encoding="utf-8")
    assert main(["sweep", str(path), "--dry-run"]) == 0, capsys.readouterr().err
    assert ("evaluation.budgets [250, 500]: tokens counted by all-MiniLM-L6-v2's tokenizer, the same for every model"
            in capsys.readouterr().out)
    sweep["evaluation"]["budget_tokenizer"] = "wordllama-l2-supercat"
    path.write_text(yaml.safe_dump(sweep), encoding="utf-8")
    assert main(["sweep", str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "evaluation.budget_tokenizer: 'wordllama-l2-supercat' has no tokenizer kbench can load" in err
    assert "leave it unset to count every config's budget tokens with all-MiniLM-L6-v2's tokenizer" in err


def test_a_static_model_run_counts_budgets_with_the_one_tokenizer(workspace):
    """A run with a model that has no tokenizer of its own (wordllama) gets its budget metrics, counted as MiniLM
    counts them: the same chunks give the same budget recall whatever the model ranked."""
    from kbench.config import load_experiment
    from kbench.runner import run_experiment
    from tests.conftest import make_config

    config = make_config(workspace, dataset={"name": "demo", "max_documents": 3, "max_queries": 6},
                         embedding={"model": "wordllama-l2-supercat"}, evaluation={"k": [10], "budgets": [250, 500]})
    result = run_experiment(load_experiment(config), progress=False, log=False)
    assert 0 <= result.metrics["span_recall_at_budget_500"] <= 1
    assert result.metrics["span_recall_at_budget_250"] <= result.metrics["span_recall_at_budget_500"]
