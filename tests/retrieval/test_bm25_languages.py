"""The ``bm25`` leg's ``language``: parity with bm25s + PyStemmer on the French, German and Russian FastAPI docs
(``../shared/datasets/fastapi_docs``), CJK bigrams on the Japanese and Chinese ones, and run keys."""
from __future__ import annotations

import re

import numpy as np
import pytest

from kbench.config import load_experiment
from kbench.paths import REPO_ROOT
from kbench.records import Chunk, Query
from kbench.retrieval.legs.bm25 import BM25Leg, BM25Params
from kbench.retrieval.registry import SearchContext
from kbench.retrieval.text.stopwords import postgres_stop_list
from kbench.retrieval.text.tokenizers import CJK_RUN, cjk_bigrams
from tests.conftest import shared_datasets_dir

FASTAPI_DOCS = shared_datasets_dir() / "fastapi_docs"
BM25S_PATTERN = r"(?u)\b\w\w+\b"  # bm25s.tokenize's default (scikit-learn's): words of two characters or more


def pages(code: str) -> dict[str, str]:
    folder = FASTAPI_DOCS / code
    if not folder.is_dir():
        pytest.skip(f"{folder} not found (../shared/datasets/fastapi_docs)")
    return {str(p.relative_to(folder)): p.read_text(encoding="utf-8") for p in sorted(folder.rglob("*.md"))}


def headings(text: str) -> list[str]:
    return [line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#") and line.lstrip("#").strip()]


def leg_over(texts: list[str], params: BM25Params) -> BM25Leg:
    return BM25Leg(SearchContext(chunks=[Chunk(f"d{i}", 0, 0, len(t), t) for i, t in enumerate(texts)]), params)


@pytest.mark.parametrize("code,language", [("fr", "french"), ("de", "german"), ("ru", "russian")])
def test_language_matches_bm25s_with_pystemmer(code, language):
    """The leg's terms and scores against bm25s.tokenize (the language's PyStemmer stemmer, PostgreSQL's stop
    list of the language, bm25s' token pattern) and bm25s.BM25 (lucene) on every paragraph of the pages."""
    bm25s = pytest.importorskip("bm25s")
    pystemmer = pytest.importorskip("Stemmer")
    texts = [p for text in pages(code).values() for p in text.split("\n\n") if p.strip()]
    questions = [h for text in pages(code).values() for h in headings(text)][:150]
    params = BM25Params(language=language, token_pattern=BM25S_PATTERN)
    assert (params.analyzer_stemmer, params.analyzer_stopwords) == (f"snowball_{language}", language)
    leg = leg_over(texts, params)

    def tokenize(strings: list[str]) -> list[list[str]]:
        return bm25s.tokenize(strings, stopwords=list(postgres_stop_list(language)), token_pattern=BM25S_PATTERN,
                              stemmer=pystemmer.Stemmer(language), return_ids=False, show_progress=False)

    their_terms = tokenize(texts)
    assert params.analyzer().analyze_many(texts) == their_terms
    retriever = bm25s.BM25(k1=params.k1, b=params.b, method="lucene")
    retriever.index(their_terms, show_progress=False)
    ours = leg.scores([Query(f"q{i}", q) for i, q in enumerate(questions)]).toarray()
    for i, terms in enumerate(tokenize(questions)):
        expected = retriever.get_scores(terms).astype(np.float64) * (params.k1 + 1)  # bm25s drops (k1 + 1)
        np.testing.assert_allclose(ours[:, i], expected, rtol=1e-5, atol=1e-5)
    assert len(texts) > 5000 and (ours > 0).sum() > 10_000


def test_language_stems_what_english_leaves_whole():
    texts = ["Les paramètres de requête sont validés automatiquement.", "Installer le serveur avec pip."]
    question = [Query("q", "valider des paramètres")]
    assert [i for i, _ in leg_over(texts, BM25Params(language="french")).search(question, None, 10)[0]] == [0]
    english = leg_over(texts, BM25Params()).search(question, None, 10)[0]
    assert [i for i, _ in english] == [0]  # only through "paramètres" itself: "valider" != "validés" in English
    french_score = leg_over(texts, BM25Params(language="french")).search(question, None, 10)[0][0][1]
    assert french_score > english[0][1]


def test_cjk_bigrams_split_runs_of_chinese_japanese_and_korean():
    assert cjk_bigrams(["fastapiを使う", "你好世界", "안녕하세요", "中", "café"]) == [
        "fastapi", "を使", "使う", "你好", "好世", "世界", "안녕", "녕하", "하세", "세요", "中", "café"]
    analyzer = BM25Params(language="none").analyzer()
    assert analyzer.analyze("The FastAPIを使う") == ["the", "fastapi", "を使", "使う"]  # no stop list, no stemming


ANCHOR = re.compile(r"\{\s*#[^}]*\}")  # "{ #code-snippets }": the English anchor of a translated heading


@pytest.mark.parametrize("code", ["ja", "zh"])
def test_none_finds_a_japanese_or_chinese_heading_in_its_page_where_whole_lines_cannot(code):
    """Each page without its headings a document, each heading (its English anchor cut) a question for its own
    page: ``\\w+`` takes a CJK clause for one token, which the page's prose rarely repeats word for word;
    bigrams match its words."""
    docs = pages(code)
    bodies = ["\n".join(line for line in text.splitlines() if not line.startswith("#")) for text in docs.values()]
    questions = [(page, ANCHOR.sub("", h).strip()) for page, text in enumerate(docs.values()) for h in headings(text)]
    questions = [(page, h) for page, h in questions if CJK_RUN.search(h)]
    queries = [Query(f"q{i}", h) for i, (_, h) in enumerate(questions)]

    def hit_at_10(params: BM25Params) -> float:
        results = leg_over(bodies, params).search(queries, None, 10)
        return float(np.mean([page in {d for d, _ in ranked} for (page, _), ranked in zip(questions, results)]))

    whole, bigrams = hit_at_10(BM25Params(stemmer="none", stopwords="none")), hit_at_10(BM25Params(language="none"))
    print(f"\n{code}: {len(queries)} headings, hit@10 of their page: \\w+ {whole:.3f}, CJK bigrams {bigrams:.3f}")
    assert len(queries) > 300 and bigrams >= 0.75 and bigrams > whole + 0.3  # measured: ja 0.412 -> 0.830, zh 0.462 -> 0.829


def test_unset_language_keeps_the_run_key_and_a_set_one_changes_it():
    config = REPO_ROOT / "configs/retrieval/bm25.yaml"
    key = load_experiment(config, []).run_key()
    assert load_experiment(config, ["retrieval.leg_params.bm25.language=null"]).run_key() == key
    french = load_experiment(config, ["retrieval.leg_params.bm25.language=french"]).run_key()
    assert french != key != load_experiment(config, ["retrieval.leg_params.bm25.language=none"]).run_key() != french
    with pytest.raises(ValueError, match="'spanish' or 'none'"):
        load_experiment(config, ["retrieval.leg_params.bm25.language=klingon"])
