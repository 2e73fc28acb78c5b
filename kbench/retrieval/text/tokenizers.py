"""Analyzers for the ``bm25`` leg: text -> list of terms (tokenize, lowercase, drop stop words, stem).

Tokenizers:
- ``regex``: every match of ``token_pattern`` (default ``\\w+``: runs of Unicode letters, digits and ``_``).
- ``word``: whitespace-separated words, punctuation kept (``str.split``), as rank_bm25's README does.
- ``postgres``: PostgreSQL's default parser (``to_tsvector``'s tokens, compounds plus their parts, numbers,
  hosts...), so BM25 can score exactly the tokens PostgreSQL indexes.
- ``code``: identifiers (runs of letters, digits and ``_``; anything else separates them), each kept whole
  and, when it has several, split into its parts at ``_``, camelCase (``parseHTTPResponse`` -> parse, HTTP,
  Response) and letter-digit boundaries (``utf8`` -> utf, 8). The split happens before lowercasing, so it
  sees the case; ``lowercase`` then applies to every token. ``keep_whole: false`` emits the parts only (an
  identifier of one part is its own part), as code-search baselines that split identifiers do.

Stop words (kbench/retrieval/text/stopwords.py: a list name or a file) are removed before stemming (they are
listed as surface forms).

CJK bigrams (``cjk_bigrams``, what the bm25 leg's ``language: none`` turns on): Chinese, Japanese and Korean
write words without spaces between them (Korean separates phrases, not morphemes), so ``\\w+`` takes a whole
line of Japanese for one token and BM25 then matches only identical lines. Each token is cut where the script
changes, and every run of Han, Hiragana, Katakana or Hangul characters becomes its overlapping character
bigrams (a run of one character stays itself): "FastAPIを使う" -> fastapi, を使, 使う. This is what Lucene's
and Elasticsearch's CJK analyzer (CJKBigramFilter) indexes; it needs no dictionary or model.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from kbench.retrieval.text.pg_parser import PgParser
from kbench.retrieval.text.stemmers import make_stemmer
from kbench.retrieval.text.stopwords import stop_words

TOKENIZER_NAMES = ("regex", "word", "postgres", "code")
IDENTIFIER = re.compile(r"\w+")
# Han (with extension A and compatibility ideographs), Hiragana, Katakana (and its phonetic extensions and
# half-width forms), Hangul syllables and jamo: the scripts CJKBigramFilter bigrams
CJK_RUN = re.compile("([\u1100-\u11ff\u3040-\u309f\u30a0-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf"
                     "\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f]+)")


def cjk_bigrams(tokens: list[str]) -> list[str]:
    """Each token cut at CJK runs; a CJK run becomes its character bigrams, other pieces stay whole."""
    out: list[str] = []
    for token in tokens:
        if token.isascii():
            out.append(token)
            continue
        for i, piece in enumerate(CJK_RUN.split(token)):  # odd pieces are the CJK runs
            if not piece:
                continue
            if i % 2 and len(piece) > 1:
                out.extend(piece[j:j + 2] for j in range(len(piece) - 1))
            else:
                out.append(piece)
    return out


def _kind(char: str) -> str:
    return "digit" if char.isdigit() else "upper" if char.isupper() else "lower"  # caseless letters: lower


def identifier_parts(identifier: str) -> list[str]:
    """``parseHTTPResponse2_x`` -> parse, HTTP, Response, 2, x: split at ``_``, a lower-to-upper change, the
    last capital of a run followed by a lowercase letter (HTTP|Response), and letter-digit changes."""
    parts = []
    for piece in identifier.split("_"):
        start = 0
        for i in range(1, len(piece)):
            before, here = _kind(piece[i - 1]), _kind(piece[i])
            after = _kind(piece[i + 1]) if i + 1 < len(piece) else ""
            if (before != here and not (before == "upper" and here == "lower")) or (
                    before == here == "upper" and after == "lower"):
                parts.append(piece[start:i])
                start = i
        if piece:
            parts.append(piece[start:])
    return parts


def code_tokens(text: str, keep_whole: bool = True) -> list[str]:
    """Each identifier, then its parts when it has more than one; with ``keep_whole=False`` the parts only
    (see the module doc)."""
    tokens = []
    for identifier in IDENTIFIER.findall(text):
        parts = identifier_parts(identifier)
        if keep_whole or parts == [identifier]:
            tokens.append(identifier)
        if parts != [identifier]:
            tokens.extend(parts)
    return tokens


def make_tokenizer(name: str, pattern: str = r"\w+", keep_whole: bool = True) -> Callable[[str], list[str]]:
    if name == "regex":
        try:
            compiled = re.compile(pattern)
        except re.error as e:
            raise ValueError(f"token_pattern {pattern!r} is not a valid regular expression: {e}") from None
        return compiled.findall
    if name == "word":
        return str.split
    if name == "postgres":
        parser = PgParser()
        return lambda text: [token for _, token in parser.words(text)]
    if name == "code":
        return code_tokens if keep_whole else lambda text: code_tokens(text, keep_whole=False)
    raise ValueError(f"tokenizer: unknown {name!r}; allowed: {', '.join(TOKENIZER_NAMES)}")


@dataclass
class Analyzer:
    """tokenize -> lowercase -> drop stop words -> stem; ``analyze_many`` stems each distinct word once."""

    tokenizer: str = "regex"
    token_pattern: str = r"\w+"
    lowercase: bool = True
    stopwords: str = "english"
    stemmer: str = "snowball_english"
    keep_whole: bool = True  # code tokenizer: each identifier beside its parts (False: parts only)
    cjk: bool = False  # CJK runs as character bigrams (see the module doc)
    _tokenize: Callable[[str], list[str]] = field(init=False, repr=False)
    _stop: frozenset[str] = field(init=False, repr=False)
    _stem: Callable[[list[str]], list[str]] = field(init=False, repr=False)

    def __post_init__(self):
        tokenize = make_tokenizer(self.tokenizer, self.token_pattern, self.keep_whole)
        self._tokenize = (lambda text: cjk_bigrams(tokenize(text))) if self.cjk else tokenize
        self._stop = stop_words(self.stopwords, self.lowercase)
        self._stem = make_stemmer(self.stemmer)

    def words(self, text: str) -> list[str]:
        if self.tokenizer == "code":  # splits at case changes, so it must see the case
            words = [w.lower() for w in self._tokenize(text)] if self.lowercase else self._tokenize(text)
        else:
            words = self._tokenize(text.lower() if self.lowercase else text)
        return [w for w in words if w not in self._stop] if self._stop else words

    def analyze(self, text: str) -> list[str]:
        return self.analyze_many([text])[0]

    def analyze_many(self, texts: list[str]) -> list[list[str]]:
        word_lists = [self.words(t) for t in texts]
        vocabulary = sorted({w for words in word_lists for w in words})
        stems = dict(zip(vocabulary, self._stem(vocabulary)))
        return [[stems[w] for w in words] for words in word_lists]
