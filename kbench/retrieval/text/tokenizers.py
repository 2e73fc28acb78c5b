"""Analyzers for the ``bm25`` leg: text -> list of terms (tokenize, lowercase, drop stop words, stem).

Tokenizers:
- ``regex``: every match of ``token_pattern`` (default ``\\w+``: runs of Unicode letters, digits and ``_``).
- ``word``: whitespace-separated words, punctuation kept (``str.split``), as rank_bm25's README does.
- ``postgres``: PostgreSQL's default parser (``to_tsvector``'s tokens, compounds plus their parts, numbers,
  hosts...), so BM25 can score exactly the tokens PostgreSQL indexes.

Stop words are removed before stemming (they are listed as surface forms).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from kbench.retrieval.text.pg_parser import PgParser
from kbench.retrieval.text.stemmers import make_stemmer
from kbench.retrieval.text.stopwords import stop_words

TOKENIZER_NAMES = ("regex", "word", "postgres")


def make_tokenizer(name: str, pattern: str = r"\w+") -> Callable[[str], list[str]]:
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
    raise ValueError(f"tokenizer: unknown {name!r}; allowed: {', '.join(TOKENIZER_NAMES)}")


@dataclass
class Analyzer:
    """tokenize -> lowercase -> drop stop words -> stem; ``analyze_many`` stems each distinct word once."""

    tokenizer: str = "regex"
    token_pattern: str = r"\w+"
    lowercase: bool = True
    stopwords: str = "english"
    stemmer: str = "snowball_english"
    _tokenize: Callable[[str], list[str]] = field(init=False, repr=False)
    _stop: frozenset[str] = field(init=False, repr=False)
    _stem: Callable[[list[str]], list[str]] = field(init=False, repr=False)

    def __post_init__(self):
        self._tokenize = make_tokenizer(self.tokenizer, self.token_pattern)
        self._stop = stop_words(self.stopwords)
        self._stem = make_stemmer(self.stemmer)

    def words(self, text: str) -> list[str]:
        words = self._tokenize(text.lower() if self.lowercase else text)
        return [w for w in words if w not in self._stop] if self._stop else words

    def analyze(self, text: str) -> list[str]:
        return self.analyze_many([text])[0]

    def analyze_many(self, texts: list[str]) -> list[list[str]]:
        word_lists = [self.words(t) for t in texts]
        vocabulary = sorted({w for words in word_lists for w in words})
        stems = dict(zip(vocabulary, self._stem(vocabulary)))
        return [[stems[w] for w in words] for words in word_lists]
