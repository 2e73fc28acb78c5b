"""tsvector / tsquery / ts_rank / ts_rank_cd emulation on hand-checked cases (values as PostgreSQL 18 returns
them; the PostgreSQL parity test in tests/retrieval/test_postgres_fts.py checks SciFact at scale)."""
from __future__ import annotations

import math

import pytest

from kbench.retrieval.text.pg_tsearch import (TextSearchConfig, TsQuery, make_tsvector, matches, ts_rank,
                                              ts_rank_cd, word_distance)
from kbench.retrieval.text.stemmers import make_stemmer
from kbench.retrieval.text.stopwords import ENGLISH_STOP_WORDS


@pytest.fixture(scope="module")
def english():
    return TextSearchConfig("english")


def test_stop_words_take_positions(english):
    assert english.to_tsvector("Effects of the drug on the self-report") == {
        "effect": (1,), "drug": (4,), "self-report": (7,), "self": (8,), "report": (9,)}


def test_postgres_stemmer_is_snowball_as_postgresql_compiles_it():
    stem = make_stemmer("postgres_english")
    # PostgreSQL 18: intern, organ, later (Snowball 3 keeps these whole); add keeps its double d
    assert stem(["internal", "organization", "lateral", "adding", "hopping", "studies"]) == [
        "intern", "organ", "later", "add", "hop", "studi"]
    assert len(ENGLISH_STOP_WORDS) == 127


def test_simple_config_keeps_stop_words_and_does_not_stem():
    assert TextSearchConfig("simple").to_tsvector("The Studies") == {"the": (1,), "studies": (2,)}


def test_positions_are_capped_like_postgresql():
    vector = make_tsvector([("cell", p) for p in range(1, 400)] + [("x", 20000), ("x", 16383)])
    assert len(vector["cell"]) == 255 and vector["cell"][-1] == 255
    assert vector["x"] == (16383,)  # clamped to 16383 and de-duplicated


def test_plainto_ands_every_lexeme_and_empty_query_matches_nothing(english):
    query = english.plainto_tsquery("the drug effects")
    assert query.operands == ["drug", "effect"] and query.kind == "and"
    vector = english.to_tsvector("a drug with effects")
    assert matches(vector, query)
    assert not matches(english.to_tsvector("a drug"), query)
    assert matches(english.to_tsvector("a drug"), english.or_tsquery("the drug effects"))
    empty = english.plainto_tsquery("the of and")
    assert empty.root is None and not matches(vector, empty)
    assert ts_rank(vector, empty) == 0.0 and ts_rank_cd(vector, empty) == 0.0


def test_single_term_scores(english):
    vector = english.to_tsvector("cat")
    query = english.plainto_tsquery("cat")
    assert ts_rank(vector, query) == pytest.approx(0.0607927, abs=1e-7)  # 0.1 / (pi^2 / 6)
    assert ts_rank_cd(vector, query) == pytest.approx(0.1, abs=1e-8)
    twice = english.to_tsvector("cat cat")  # 0.1 * (1 + 1/4) / 1.6449...
    assert ts_rank(twice, query) == pytest.approx((0.1 + 0.1 / 4) / 1.64493406685, rel=1e-6)
    assert ts_rank_cd(twice, query) == pytest.approx(0.2, abs=1e-7)  # two covers of one word each


def test_cover_density_and_proximity_for_and_queries(english):
    query = english.plainto_tsquery("fat rat")
    near = english.to_tsvector("fat rat")
    far = english.to_tsvector("fat big old rat")
    # one cover of 2 occurrences with 0 / 2 noise words: (2 / (1/0.1 + 1/0.1)) / (1 + noise)
    assert ts_rank_cd(near, query) == pytest.approx(0.1, abs=1e-7)
    assert ts_rank_cd(far, query) == pytest.approx(0.1 / 3, abs=1e-7)
    # ts_rank with AND: sqrt(0.1 * 0.1 * word_distance(d)) for the one pair
    assert ts_rank(near, query) == pytest.approx(math.sqrt(0.01 * word_distance(1)), rel=1e-6)
    assert ts_rank(far, query) < ts_rank(near, query)
    assert word_distance(101) == pytest.approx(1e-30)


def test_normalization_bits(english):
    vector = english.to_tsvector("fat rat sat on a mat")  # fat:1 rat:2 sat:3 mat:6, 4 positions
    query = english.plainto_tsquery("fat rat")
    base = ts_rank_cd(vector, query)
    assert ts_rank_cd(vector, query, normalization=2) == pytest.approx(base / 4, rel=1e-6)
    assert ts_rank_cd(vector, query, normalization=32) == pytest.approx(base / (base + 1), rel=1e-6)
    base_rank = ts_rank(vector, query)
    assert ts_rank(vector, query, normalization=8) == pytest.approx(base_rank / 4, rel=1e-6)


def test_tsquery_text_quotes_lexemes():
    assert TsQuery.any_of(["it's", "a\\b"]).to_text() == "( 'it''s' | 'a\\\\b' )"
