"""The ``bm25`` leg: parity with rank_bm25's BM25Okapi (okapi_epsilon idf) and bm25s (lucene idf) on real
SciFact with the same tokens and parameters, the idf formulas, filters, and a run through the pipeline."""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import pytest

from kbench.chunking import chunk_corpus
from kbench.config import ChunkingConfig, DatasetConfig, load_experiment
from kbench.datasets import load_dataset
from kbench.records import Chunk, Query
from kbench.retrieval.legs.bm25 import BM25Index, BM25Params, bm25_idf
from kbench.retrieval.registry import LEGS, SearchContext
from kbench.retrieval.text.tokenizers import Analyzer
from kbench.runner import run_experiment
from kbench.paths import REPO_ROOT
from tests.conftest import SCIFACT

needs_scifact = pytest.mark.skipif(not (SCIFACT / "corpus.jsonl").is_file(), reason="SciFact not in ../shared/datasets")


@lru_cache(maxsize=1)
def scifact_tokens():
    """The full SciFact corpus (title + abstract, one chunk each) and its 300 test claims, analyzed once."""
    dataset = load_dataset(DatasetConfig(name="scifact"))
    chunks = chunk_corpus(dataset.documents, ChunkingConfig(strategy="none"))
    analyzer = Analyzer(tokenizer="regex", stopwords="english", stemmer="snowball_english")
    return chunks, dataset.queries, analyzer.analyze_many([c.text for c in chunks]), analyzer.analyze_many(
        [q.text for q in dataset.queries])


def dense_scores(index: BM25Index, query: list[str]) -> np.ndarray:
    return index.scores([query]).toarray()[:, 0]


@needs_scifact
@pytest.mark.slow
def test_okapi_epsilon_matches_rank_bm25_on_scifact():
    from rank_bm25 import BM25Okapi

    _, queries, docs, query_tokens = scifact_tokens()
    ours = BM25Index(docs, k1=1.5, b=0.75, idf="rank_bm25", epsilon=0.25)
    theirs = BM25Okapi(docs, k1=1.5, b=0.75, epsilon=0.25)
    assert len(queries) == 300
    worst, same_top10 = 0.0, 0
    for tokens in query_tokens:
        expected = theirs.get_scores(tokens)
        got = dense_scores(ours, tokens)
        worst = max(worst, float(np.abs(got - expected).max()))
        top = [i for i, _ in ours.top_k([tokens], 10)[0]]
        # our top-10 is a valid top-10 under rank_bm25's scores (ties may order either way)
        np.testing.assert_allclose(expected[top], np.sort(expected)[::-1][:10], atol=1e-6)
        same_top10 += top == list(np.argsort(-expected, kind="stable")[:10])
    print(f"\nrank_bm25 parity: 300 queries x {len(docs)} docs, max |score diff| {worst:.2e}, "
          f"identical top-10 id lists {same_top10}/300")
    assert worst < 1e-6
    assert same_top10 >= 295  # the rest differ only inside exact score ties


@needs_scifact
def test_lucene_matches_bm25s_on_scifact():
    import bm25s

    _, _, docs, query_tokens = scifact_tokens()
    k1, b = 1.2, 0.75
    ours = BM25Index(docs, k1=k1, b=b, idf="lucene")
    retriever = bm25s.BM25(k1=k1, b=b, method="lucene")
    retriever.index(docs, show_progress=False)
    for tokens in query_tokens[:100]:
        # bm25s drops Lucene's constant (k1 + 1) numerator; scores are float32
        expected = retriever.get_scores(tokens).astype(np.float64) * (k1 + 1)
        np.testing.assert_allclose(dense_scores(ours, tokens), expected, rtol=1e-5, atol=1e-5)


def test_idf_variants():
    df = np.array([1, 5, 9])
    lucene = bm25_idf(df, 10, "lucene")
    assert lucene == pytest.approx([math.log(1 + 9.5 / 1.5), math.log(1 + 5.5 / 5.5), math.log(1 + 1.5 / 9.5)])
    raw = [math.log(9.5 / 1.5), math.log(5.5 / 5.5), math.log(1.5 / 9.5)]
    okapi = bm25_idf(df, 10, "okapi_epsilon", epsilon=0.25)
    assert okapi[:2] == pytest.approx(raw[:2])
    assert okapi[2] == pytest.approx(0.25 * sum(raw) / 3)  # negative idf -> epsilon * mean idf
    assert (bm25_idf(df, 10, "rank_bm25") == okapi).all()


def chunk(i: int, text: str) -> Chunk:
    return Chunk(f"d{i}", 0, 0, len(text), text)


def test_leg_ranks_filters_and_skips_non_matching_chunks():
    chunks = [chunk(0, "Retries use exponential backoff."), chunk(1, "Timeouts and retries are configurable."),
              chunk(2, "Installing the SDK with pip."), chunk(3, "Retry retry retries: backoff everywhere.")]
    leg = LEGS.get("bm25").impl(SearchContext(chunks=chunks), BM25Params())
    assert not leg.needs_query_vectors
    (ranked,) = leg.search([Query("q", "How do retries back off?")], None, 10, None)
    assert [i for i, _ in ranked][:1] == [3] and {i for i, _ in ranked} == {0, 1, 3}
    assert all(a[1] >= b[1] for a, b in zip(ranked, ranked[1:]))
    mask = np.array([True, True, True, False])
    (filtered,) = leg.search([Query("q", "How do retries back off?")], None, 10, mask)
    assert 3 not in {i for i, _ in filtered} and filtered
    assert leg.search([Query("q", "the of and")], None, 10, None) == [[]]


def test_analyzer_options():
    assert Analyzer(stopwords="none", stemmer="none").analyze("The Cells' growth") == ["the", "cells", "growth"]
    assert Analyzer().analyze("The Cells' growth") == ["cell", "growth"]
    assert Analyzer(tokenizer="word", stemmer="none").analyze("IL-6, in mice") == ["il-6,", "mice"]
    assert Analyzer(tokenizer="postgres", stemmer="postgres_english").analyze("self-reported IL-6") == [
        "self-report", "self", "report", "il", "-6"]


def test_bad_params_fail_with_the_allowed_values(config_for):
    with pytest.raises(Exception, match="idf"):
        load_experiment(config_for(retrieval={"legs": ["bm25"], "leg_params": {"bm25": {"idf": "bm42"}}}))


def test_bm25_config_runs_on_the_demo_set(workspace):
    experiment = load_experiment(REPO_ROOT / "configs/retrieval/bm25.yaml",
                                 [f"workspace={workspace}", "tracking.enabled=false"])
    result = run_experiment(experiment, progress=False, log=False)
    assert result.counts["queries"] > 0
    ndcg10 = [v for k, v in result.metrics.items() if k.endswith("ndcg_at_10")]
    assert ndcg10 and all(0 < v <= 1 for v in ndcg10)
