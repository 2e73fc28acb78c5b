"""Stemmers by name.

- ``none``: words pass through.
- ``snowball_english``: Snowball's English ("Porter2") stemmer in its current release, via PyStemmer (C, fast).
- ``postgres_english``: the Snowball English stemmer exactly as compiled into PostgreSQL 18 (its
  ``english_stem`` dictionary): Snowball 2.2.0's algorithm plus one later rule, "keep the double consonant
  after a word-initial a, e or o" (adding -> add, not ad). Current Snowball (3.x, in PyStemmer 3) differs
  more: it keeps "internal", "organization", "lateral" whole where PostgreSQL stems them to intern, organ,
  later. Built on the pure-Python generated code of ``snowballstemmer==2.2.0`` (loaded directly:
  ``snowballstemmer.stemmer()`` would hand over to PyStemmer's newer C stemmer), with a cache per stemmer.
"""
from __future__ import annotations

from typing import Callable

Stemmer = Callable[[list[str]], list[str]]

STEMMER_NAMES = ("none", "snowball_english", "postgres_english")


def make_stemmer(name: str) -> Stemmer:
    """A function stemming a list of lowercase words, element by element."""
    if name == "none":
        return lambda words: list(words)
    if name == "snowball_english":
        try:
            import Stemmer as pystemmer
        except ImportError:
            raise ImportError("stemmer snowball_english needs PyStemmer: pip install PyStemmer") from None
        return pystemmer.Stemmer("english").stemWords  # keeps its own cache of recent words
    if name == "postgres_english":
        return _postgres_english()
    raise ValueError(f"stemmer: unknown {name!r}; allowed: {', '.join(STEMMER_NAMES)}")


def _postgres_english() -> Stemmer:
    try:
        from snowballstemmer.english_stemmer import EnglishStemmer
    except ImportError:
        raise ImportError('stemmer postgres_english needs pip install "snowballstemmer==2.2.0"') from None
    if EnglishStemmer().stemWord("internal") != "intern":  # Snowball >= 3.0 keeps "internal"
        import snowballstemmer

        raise ImportError(
            "stemmer postgres_english needs Snowball 2.2.0's English as PostgreSQL ships it: "
            f'pip install "snowballstemmer==2.2.0" (found snowballstemmer {getattr(snowballstemmer, "__version__", "?")})'
        )

    class PostgresEnglishStemmer(EnglishStemmer):
        def _EnglishStemmer__r_Step_1b(self):  # overrides the private Step_1b of the generated class
            self.ket = self.cursor
            among_var = self.find_among_b(EnglishStemmer.a_4)  # eed eedly | ed edly ing ingly
            if among_var == 0:
                return False
            self.bra = self.cursor
            if among_var == 1:
                if not self._EnglishStemmer__r_R1():
                    return False
                return self.slice_from("ee")
            v_1 = self.limit - self.cursor
            if not self.go_out_grouping_b(EnglishStemmer.g_v, 97, 121):  # a vowel before the suffix
                return False
            self.cursor = self.limit - v_1
            if not self.slice_del():
                return False
            v_2 = self.limit - self.cursor
            among_var = self.find_among_b(EnglishStemmer.a_3)  # at bl iz | bb dd ff ... | ""
            if among_var == 0:
                return False
            before_ending = self.cursor
            self.cursor = self.limit - v_2
            if among_var == 1:
                c = self.cursor
                self.insert(self.cursor, self.cursor, "e")
                self.cursor = c
            elif among_var == 2:
                # PostgreSQL's rule: "add", "egg", "err", "odd" keep their double consonant
                if before_ending - 1 == self.limit_backward and self.current[before_ending - 1] in "aeo":
                    return False
                self.ket = self.cursor
                if self.cursor <= self.limit_backward:
                    return False
                self.cursor -= 1
                self.bra = self.cursor
                if not self.slice_del():
                    return False
            else:
                if self.cursor != self.I_p1:
                    return False
                v_3 = self.limit - self.cursor
                if not self._EnglishStemmer__r_shortv():
                    return False
                self.cursor = self.limit - v_3
                c = self.cursor
                self.insert(self.cursor, self.cursor, "e")
                self.cursor = c
            return True

    stemmer = PostgresEnglishStemmer()
    cache: dict[str, str] = {}

    def stem_words(words: list[str]) -> list[str]:
        out = []
        for word in words:
            stem = cache.get(word)
            if stem is None:
                stem = cache[word] = stemmer.stemWord(word)
            out.append(stem)
        return out

    return stem_words
