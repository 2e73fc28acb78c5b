"""The ``code`` tokenizer of the bm25 leg on hand-written identifiers, and per-document-type tokenizers."""
from __future__ import annotations

import numpy as np
import pytest

from kbench.records import Chunk, Query
from kbench.retrieval.legs.bm25 import BM25Leg, BM25Params
from kbench.retrieval.registry import SearchContext
from kbench.retrieval.text.tokenizers import Analyzer, code_tokens


@pytest.mark.parametrize("text, tokens", [
    ("get_user_id", ["get_user_id", "get", "user", "id"]),
    ("parseHTTPResponse", ["parseHTTPResponse", "parse", "HTTP", "Response"]),
    ("XMLHttpRequest2", ["XMLHttpRequest2", "XML", "Http", "Request", "2"]),
    ("utf8Decode", ["utf8Decode", "utf", "8", "Decode"]),
    ("os.path.join(x)", ["os", "path", "join", "x"]),  # non-alphanumerics separate identifiers
    ("__init__", ["__init__", "init"]),
    ("MAX_RETRIES=3", ["MAX_RETRIES", "MAX", "RETRIES", "3"]),
    ("ÉtéBon", ["ÉtéBon", "Été", "Bon"]),  # case changes outside ASCII too
    ("plain words", ["plain", "words"]),  # one-part identifiers are not repeated
])
def test_code_tokens_split_identifiers_and_keep_them_whole(text, tokens):
    assert code_tokens(text) == tokens


def test_code_analyzer_lowercases_after_splitting_then_stops_and_stems():
    analyzer = Analyzer(tokenizer="code")
    assert analyzer.analyze("def getRetryCount(self): return self.retry_count") == [
        "def", "getretrycount", "get", "retri", "count", "self", "return", "self", "retry_count", "retri", "count"]
    assert Analyzer(tokenizer="regex").analyze("getRetryCount") == ["getretrycount"]  # unchanged for regex


def test_tokenizer_per_document_type():
    chunks = [Chunk("code.py", 0, 0, 30, "def getRetryCount(): pass"), Chunk("guide.md", 0, 0, 30, "getRetryCount")]
    context = SearchContext(chunks, doc_types={"code.py": "code", "guide.md": "markdown"})
    params = BM25Params(tokenizer={"code": "code", "default": "regex"})
    assert params.tokenizer_of("code") == "code" and params.tokenizer_of("markdown") == "regex"
    leg = BM25Leg(context, params)
    (found,) = leg.search([Query("q", "retry count")], None, 10)
    assert [row for row, _ in found] == [0]  # only the code file is split into retry, count
    (whole,) = leg.search([Query("q", "getRetryCount")], None, 10)
    assert sorted(row for row, _ in whole) == [0, 1]  # the whole identifier matches both
    plain = BM25Leg(context, BM25Params())
    assert plain.search([Query("q", "retry count")], None, 10) == [[]]
    with pytest.raises(Exception, match="tokenizer"):
        BM25Params(tokenizer={"code": "camel"})
    assert np.isfinite([s for _, s in whole]).all()
