"""Stemmers by name.

- ``none``: words pass through.
- ``snowball_english``: Snowball's English ("Porter2") stemmer in its current release, via PyStemmer (C, fast).
- ``postgres_english``: the Snowball English stemmer exactly as compiled into PostgreSQL 18 (its
  ``english_stem`` dictionary): Snowball 2.2.0's algorithm plus one later rule, "keep the double consonant
  after a word-initial a, e or o" (adding -> add, not ad). Current Snowball (3.x, in PyStemmer 3) differs
  more: it keeps "internal", "organization", "lateral" whole where PostgreSQL stems them to intern, organ,
  later. Built on the pure-Python generated code of ``snowballstemmer==2.2.0`` (loaded directly:
  ``snowballstemmer.stemmer()`` would hand over to PyStemmer's newer C stemmer), with a cache per stemmer.
- ``snowball_<language>`` (french, german, portuguese, russian, spanish): current Snowball's stemmer of that
  language, via PyStemmer, as ``snowball_english`` is for English.
- ``postgres_<language>``: the Snowball stemmer of that language as compiled into PostgreSQL 18 (its
  ``<language>_stem`` dictionary). French, Portuguese, Russian and Spanish are Snowball 2.2.0's generated code
  (``snowballstemmer==2.2.0``), which gives PostgreSQL's stem on every word of the fastapi_docs pages of those
  languages. German is not: PostgreSQL 18 took the later Snowball German (between 2.2.0 and 3.0) whose prelude
  turns ae, oe, ue into ä, ö, ü (except in qu), whose first suffix step also strips -erin, -erinnen, turns -ln,
  -lns into -l and keeps -em after "syst" (System); Snowball 3.0 (PyStemmer 3) then added rules PostgreSQL
  lacks (-et). ``postgres_german`` is 2.2.0's German with those rules patched in (:class:`_PostgresGerman`).
"""
from __future__ import annotations

from typing import Callable

from kbench.errors import MissingPackageError
from kbench.packages import install_command, installed_version, optional_import

Stemmer = Callable[[list[str]], list[str]]

# the languages of PostgreSQL's configurations emulated beside english (pg_tsearch.py)
LANGUAGES = ("french", "german", "portuguese", "russian", "spanish")
STEMMER_NAMES = ("none", "snowball_english", "postgres_english", *(f"snowball_{language}" for language in LANGUAGES),
                 *(f"postgres_{language}" for language in LANGUAGES))


def make_stemmer(name: str) -> Stemmer:
    """A function stemming a list of lowercase words, element by element."""
    if name == "none":
        return lambda words: list(words)
    if name.startswith("snowball_") and name in STEMMER_NAMES:
        pystemmer = optional_import("Stemmer", f"stemmer {name}")
        return pystemmer.Stemmer(name.removeprefix("snowball_")).stemWords  # keeps its own cache of recent words
    if name == "postgres_english":
        return _postgres_english()
    if name.startswith("postgres_") and name in STEMMER_NAMES:
        return _cached(_postgres_snowball(name.removeprefix("postgres_")))
    raise ValueError(f"stemmer: unknown {name!r}; allowed: {', '.join(STEMMER_NAMES)}")


def _postgres_english() -> Stemmer:
    EnglishStemmer = optional_import("snowballstemmer.english_stemmer", "stemmer postgres_english").EnglishStemmer
    if EnglishStemmer().stemWord("internal") != "intern":  # Snowball >= 3.0 keeps "internal"
        import snowballstemmer

        raise MissingPackageError(
            "stemmer postgres_english needs Snowball 2.2.0's English as PostgreSQL ships it (found snowballstemmer "
            f"{getattr(snowballstemmer, '__version__', '?')}); install it with `{install_command('snowballstemmer', reinstall=True)}`")

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

    return _cached(PostgresEnglishStemmer())


def _snowball_2_2_class(language: str):
    """The pure-Python generated class of ``language`` from snowballstemmer 2.2.0 (the version PostgreSQL's
    stemmers match), loaded directly so PyStemmer's newer C stemmers never stand in for it."""
    module = optional_import(f"snowballstemmer.{language}_stemmer", f"stemmer postgres_{language}")
    found = installed_version("snowballstemmer") or "of no version"
    if found != "2.2.0":
        raise MissingPackageError(f"stemmer postgres_{language} needs snowballstemmer 2.2.0, whose rules PostgreSQL "
                                  f"uses (found snowballstemmer {found}); install it with "
                                  f"`{install_command('snowballstemmer', reinstall=True)}`")
    return getattr(module, f"{language.capitalize()}Stemmer")


def _postgres_snowball(language: str):
    base = _snowball_2_2_class(language)
    if language != "german":
        return base()
    return _postgres_german(base)()


def _postgres_german(GermanStemmer):
    """Snowball 2.2.0's German with the rules PostgreSQL 18's german_stem has on top (see the module doc)."""
    from snowballstemmer.among import Among

    vowels = frozenset("aeiouyäöü")
    # step 1's suffixes, sorted as Snowball sorts a backward among (by reversed string); results:
    # 1 -em (kept after syst), 2 delete, 3 delete then -niss -> -nis, 4 -s after a valid s-ending, 5 -> l
    step1 = [Among("e", -1, 3), Among("em", -1, 1), Among("en", -1, 3), Among("erinnen", 2, 2),
             Among("erin", -1, 2), Among("ln", -1, 5), Among("ern", -1, 2), Among("er", -1, 2),
             Among("s", -1, 4), Among("es", 8, 3), Among("lns", 8, 5)]

    class PostgresGermanStemmer(GermanStemmer):
        def _GermanStemmer__r_prelude(self):  # overrides the private prelude of the generated class
            word = list(self.current)
            for i in range(1, len(word) - 1):  # u, y between vowels -> U, Y (not vowels: kept from stemming)
                if word[i] in "uy" and word[i - 1] in vowels and word[i + 1] in vowels:
                    word[i] = word[i].upper()
            out, i = [], 0
            while i < len(word):  # then ß -> ss, ae -> ä, oe -> ö, ue -> ü; qu is left as it is
                pair = "".join(word[i:i + 2])
                if word[i] == "ß":
                    out.append("ss")
                    i += 1
                elif pair in ("ae", "oe", "ue"):
                    out.append({"ae": "ä", "oe": "ö", "ue": "ü"}[pair])
                    i += 2
                else:
                    out.append(pair if pair == "qu" else word[i])
                    i += 2 if pair == "qu" else 1
            self.set_current("".join(out))
            return True

        def _GermanStemmer__r_standard_suffix(self):
            self._step1()
            self._step2()
            self._step3()
            return True

        def _step1(self):
            start = self.limit - self.cursor
            self.ket = self.cursor
            among_var = self.find_among_b(step1)
            if among_var and self._r1_from_bra():
                if among_var == 1:
                    if not self.eq_s_b("syst"):
                        self.slice_del()
                elif among_var == 2:
                    self.slice_del()
                elif among_var == 3:
                    self.slice_del()
                    before = self.limit - self.cursor
                    self.ket = self.cursor
                    if self.eq_s_b("s"):
                        self.bra = self.cursor
                        if self.eq_s_b("nis"):
                            self.slice_del()
                    self.cursor = self.limit - before
                elif among_var == 4:
                    if self.in_grouping_b(GermanStemmer.g_s_ending, 98, 116):
                        self.slice_del()
                else:
                    self.slice_from("l")
            self.cursor = self.limit - start

        def _r1_from_bra(self) -> bool:
            self.bra = self.cursor
            return self.I_p1 <= self.cursor

        def _step2(self):  # unchanged from 2.2.0: -en, -er, -est; -st after a valid st-ending and 3 letters
            start = self.limit - self.cursor
            self.ket = self.cursor
            among_var = self.find_among_b(GermanStemmer.a_2)
            if among_var and self._r1_from_bra():
                if among_var == 1:
                    self.slice_del()
                elif self.in_grouping_b(GermanStemmer.g_st_ending, 98, 116) and self.cursor - 3 >= self.limit_backward:
                    self.cursor -= 3
                    self.slice_del()
            self.cursor = self.limit - start

        def _step3(self):  # unchanged from 2.2.0: derivational suffixes in R2
            start = self.limit - self.cursor
            self.ket = self.cursor
            among_var = self.find_among_b(GermanStemmer.a_4)
            self.bra = self.cursor
            if among_var and self.I_p2 <= self.cursor:
                if among_var == 1:  # end, ung: then -ig unless after e
                    self.slice_del()
                    self._try_delete(["ig"], needs_r2=True, not_after_e=True)
                elif among_var == 2:  # ig, isch, ik: not after e
                    before = self.limit - self.cursor
                    if not self.eq_s_b("e"):
                        self.cursor = self.limit - before
                        self.slice_del()
                elif among_var == 3:  # lich, heit: then -er or -en in R1
                    self.slice_del()
                    self._try_delete(["er", "en"], needs_r2=False, not_after_e=False)
                else:  # keit: then -ig or -lich in R2
                    self.slice_del()
                    self._try_delete(["lich", "ig"], needs_r2=True, not_after_e=False)
            self.cursor = self.limit - start

        def _try_delete(self, suffixes: list[str], needs_r2: bool, not_after_e: bool):
            before = self.limit - self.cursor
            self.ket = self.cursor
            for suffix in suffixes:
                if self.eq_s_b(suffix):
                    break
                self.cursor = self.limit - before
            else:
                return
            self.bra = self.cursor
            if not_after_e:
                here = self.limit - self.cursor
                if self.eq_s_b("e"):
                    self.cursor = self.limit - before
                    return
                self.cursor = self.limit - here
            if self.cursor >= (self.I_p2 if needs_r2 else self.I_p1):
                self.slice_del()
            else:
                self.cursor = self.limit - before

    return PostgresGermanStemmer


def _cached(stemmer) -> Stemmer:
    """``stemWord`` over a list, each distinct word stemmed once per stemmer."""
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
