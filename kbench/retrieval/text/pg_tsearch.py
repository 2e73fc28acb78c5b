"""PostgreSQL full-text search, emulated: ``to_tsvector``, ``plainto_tsquery``, ``@@``, ``ts_rank``, ``ts_rank_cd``.

What each function reproduces (PostgreSQL 18 sources: ts_parse.c, to_tsany.c, dict_snowball.c, tsrank.c):

- ``to_tsvector(config, text)``: the default parser's tokens (:mod:`pg_parser`); each token type mapped to a
  dictionary by the configuration. ``english`` (likewise ``french``, ``german``, ``portuguese``, ``russian``,
  ``spanish``): words and word parts -> ``english_stem`` (lowercase; a stop word from PostgreSQL's
  english.stop yields nothing; else the Snowball English stem as PostgreSQL compiles it, see :mod:`stemmers`
  ``postgres_english``; ``russian`` sends ASCII words to english_stem); numbers, number-words,
  emails, hosts, URLs, paths, versions -> ``simple`` (lowercase, kept); blanks, tags, protocols and XML
  entities are not mapped and are skipped without a position. Every mapped token takes the next position,
  *including stop words*, so "effect of the drug" gives effect:1 drug:4. Positions stop growing at 16383, a
  lexeme keeps at most 255 positions, and tokens of 2047 bytes or more are skipped. All positions carry
  weight D (to_tsvector assigns none).
- ``plainto_tsquery(config, text)``: the same lexemes ANDed together (duplicates kept, stop words dropped);
  text with no lexeme gives an empty query, which matches nothing.
- ``matches(vector, query)``: ``vector @@ query``, a boolean evaluation of the query over the vector's lexemes;
  below a phrase operator (``a <N> b``: b exactly N positions after a, as websearch_to_tsquery builds for a
  compound, kbench/retrieval/text/pg_websearch.py) over their positions, as TS_execute / TS_phrase_execute do
  (``execute``). ``TsQuery.to_pg_text`` prints a query as PostgreSQL's tsqueryout does.
- ``ts_rank(vector, query, weights, normalization)`` (tsrank.c calc_rank): if the query's top operator is
  AND or a phrase, the proximity score 1 - prod(1 - sqrt(w_i w_j word_distance(|p_i - p_j|))) over all position pairs of
  distinct query lexemes (word_distance(d) = 1 / (1.005 + 0.05 exp(d / 1.5 - 2)), 1e-30 beyond 100); with a
  single distinct lexeme, or an OR query, the frequency score mean over the query's distinct lexemes of
  sum_j w_j / j^2 / 1.64493406685 (the 1/j^2 series normalized by pi^2/6). Float (4-byte) arithmetic where
  PostgreSQL uses float, so scores agree to the last bit.
- ``ts_rank_cd(vector, query, weights, normalization)`` (calc_rank_cd): cover density. The document's query
  lexeme occurrences are scanned for "covers" (shortest spans satisfying the query, found left to right; a
  phrase is checked on the positions inside the span);
  each cover adds (#occurrences in it / sum of 1/w) / (1 + #other words inside it). Double arithmetic,
  returned as float4.
- ``normalization`` bits (both functions): 1 divide by 1 + log(length) (log2 for ts_rank, natural log for
  ts_rank_cd, as PostgreSQL does), 2 by length, 4 (ts_rank_cd only) by mean harmonic distance between
  covers, 8 by number of unique lexemes, 16 by 1 + log2(unique lexemes), 32 rank / (rank + 1). Length is
  the number of positions (a lexeme without positions counts 1).

A tsvector here is a ``dict[str, tuple[int, ...]]`` (lexeme -> sorted positions); a tsquery a small tree of
tuples (see :class:`TsQuery`).
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from functools import cached_property
from typing import Callable, Union

from kbench.retrieval.text import pg_parser as P
from kbench.retrieval.text.stemmers import make_stemmer
from kbench.retrieval.text.stopwords import stop_words

MAX_POSITION = (1 << 14) - 1  # MAXENTRYPOS - 1: positions beyond are clamped to this
MAX_POSITIONS_PER_LEXEME = 255  # MAXNUMPOS - 1
MAX_TOKEN_BYTES = (1 << 11) - 1  # MAXSTRLEN: longer tokens are skipped ("word is too long to be indexed")
DEFAULT_WEIGHTS = (0.1, 0.2, 0.4, 1.0)  # {D, C, B, A}, as float4 in tsrank.c

TsVector = dict[str, tuple[int, ...]]

# --------------------------------------------------------------------------- configurations
_SIMPLE = "simple"
# PostgreSQL's configurations of a language with a Snowball dictionary <language>_stem (stemmer and stop list)
LANGUAGE_CONFIGS = ("english", "french", "german", "portuguese", "russian", "spanish")
_WORD_TYPES = (P.ASCIIWORD, P.WORD, P.ASCIIHWORD, P.HWORD, P.ASCIIPARTHWORD, P.PARTHWORD)
_ASCII_WORD_TYPES = (P.ASCIIWORD, P.ASCIIHWORD, P.ASCIIPARTHWORD)
_OTHER_TYPES = (P.NUMWORD, P.NUMHWORD, P.NUMPARTHWORD, P.EMAIL, P.URL, P.HOST, P.URLPATH, P.FILEPATH, P.SCIENTIFIC,
                P.DECIMAL, P.SIGNEDINT, P.UNSIGNEDINT, P.VERSION)


def language_mapping(language: str) -> dict[int, str]:
    """Token type -> dictionary, as ``\\dF+ <language>`` lists it: words and word parts -> <language>_stem,
    numbers, emails, hosts, URLs, paths, versions -> simple; blank, tag, protocol and entity are unmapped.
    PostgreSQL's snowball_create.sql gives a language of a non-Latin alphabet (russian here) english_stem for
    its ASCII words (asciiword, asciihword, hword_asciipart), so "FastAPI" is stemmed as English there."""
    mapping = {t: f"{language}_stem" for t in _WORD_TYPES}
    if language == "russian":
        mapping.update({t: "english_stem" for t in _ASCII_WORD_TYPES})
    mapping.update({t: _SIMPLE for t in _OTHER_TYPES})
    return mapping


ENGLISH_MAPPING: dict[int, str] = language_mapping("english")
# The `simple` configuration maps the same token types, all to the simple dictionary.
SIMPLE_MAPPING: dict[int, str] = {t: _SIMPLE for t in ENGLISH_MAPPING}
CONFIGS: dict[str, dict[int, str]] = {"simple": SIMPLE_MAPPING,
                                      **{language: language_mapping(language) for language in LANGUAGE_CONFIGS}}
# Every text search configuration PostgreSQL 15-18 ships (pg_ts_config), emulated or not: what a query_lang
# given to a production SQL function run inside PostgreSQL (pg_hybrid) may name.
POSTGRES_CONFIG_NAMES = (
    "arabic", "armenian", "basque", "catalan", "danish", "dutch", "english", "estonian", "finnish", "french",
    "german", "greek", "hindi", "hungarian", "indonesian", "irish", "italian", "lithuanian", "nepali", "norwegian",
    "portuguese", "romanian", "russian", "serbian", "simple", "spanish", "swedish", "tamil", "turkish", "yiddish",
)

_LOWER_EXCEPTIONS = {"\u0130": "i"}  # towlower maps one code point to one; Python's lower() gives "i̇"


def pg_lower(text: str) -> str:
    """str_tolower() in a UTF-8 libc locale: towlower() code point by code point."""
    if text.isascii():
        return text.lower()
    out = []
    for ch in text:
        low = ch.lower()
        out.append(low if len(low) == 1 else _LOWER_EXCEPTIONS.get(ch, ch))
    return "".join(out)


class TextSearchConfig:
    """A text search configuration (parser + token-type -> dictionary map), with per-instance caches.

    A ``<language>_stem`` dictionary lowercases, drops a word of PostgreSQL's ``<language>.stop`` and stems the
    rest with the Snowball stemmer PostgreSQL compiles in (kbench/retrieval/text/stemmers.py,
    ``postgres_<language>``). ``stopwords`` (kbench/retrieval/text/stopwords.py: a list name or a file)
    replaces the stop list of the configuration's word dictionaries, as ``CREATE TEXT SEARCH DICTIONARY ...
    (TEMPLATE = snowball, Language = <language>, StopWords = <list>)`` mapped in their place would (``simple``:
    a simple dictionary with that StopWords, mapped for every token type). None: the configuration's own
    (<language>.stop; simple: none). A stop word still takes its position."""

    def __init__(self, name: str = "english", stopwords: str | None = None):
        if name not in CONFIGS:
            raise ValueError(f"text search config {name!r} is not emulated; allowed: {', '.join(CONFIGS)}")
        self.name = name
        self.mapping = CONFIGS[name]
        self.parser = P.PgParser()
        languages = [d.removesuffix("_stem") for d in dict.fromkeys(self.mapping.values()) if d != _SIMPLE]
        self._stems = {f"{language}_stem": make_stemmer(f"postgres_{language}") for language in languages}
        if stopwords is None:
            self._stops = {f"{language}_stem": stop_words(language) for language in languages}
            self._simple_stop: frozenset[str] = frozenset()
        else:  # PostgreSQL lowercases a stop file's words as it reads them
            custom = stop_words(stopwords, lowercase=True)
            self._stops = {f"{language}_stem": custom for language in languages}
            self._simple_stop = custom if name == "simple" else frozenset()
        self._lexize_cache: dict[tuple[str, str], str | None] = {}

    def lexize(self, dictionary: str, token: str) -> str | None:
        """A dictionary's output for one token: a lexeme, or None for a stop word."""
        key = (dictionary, token)
        cached = self._lexize_cache.get(key, "\0")
        if cached != "\0":
            return cached
        low = pg_lower(token)
        if dictionary == _SIMPLE:  # the built-in simple dictionary has no stop words
            result = None if low in self._simple_stop else low
        elif len(token.encode("utf-8")) > 1000:
            result = low  # dict_snowball passes very long strings through unstemmed
        elif not low or low in self._stops[dictionary]:
            result = None
        else:
            result = self._stems[dictionary]([low])[0]
        self._lexize_cache[key] = result
        return result

    def lexemes(self, text: str) -> list[tuple[str, int]]:
        """parsetext(): (lexeme, position) for every token with a lexeme, positions from 1, clamped."""
        out = []
        position = 0
        for token_type, token in self.parser.words(text):
            dictionary = self.mapping.get(token_type)
            if dictionary is None:
                continue
            if len(token) * 4 >= MAX_TOKEN_BYTES and len(token.encode("utf-8")) >= MAX_TOKEN_BYTES:
                continue  # skipped before it takes a position
            position += 1
            lexeme = self.lexize(dictionary, token)
            if lexeme is not None:
                out.append((lexeme, min(position, MAX_POSITION)))
        return out

    def to_tsvector(self, text: str) -> TsVector:
        return make_tsvector(self.lexemes(text))

    def plainto_tsquery(self, text: str) -> "TsQuery":
        return TsQuery.all_of([lexeme for lexeme, _ in self.lexemes(text)])

    def or_tsquery(self, text: str) -> "TsQuery":
        """The plainto lexemes ORed (each distinct lexeme once): any term matches. Not a PostgreSQL
        function; what ``to_tsquery('a | b | ...')`` over plainto's lexemes gives."""
        return TsQuery.any_of(list(dict.fromkeys(lexeme for lexeme, _ in self.lexemes(text))))


def make_tsvector(lexemes: list[tuple[str, int]]) -> TsVector:
    """uniqueWORD(): group positions per lexeme, sorted, de-duplicated, at most 255, none after 16383."""
    grouped: dict[str, list[int]] = {}
    for lexeme, position in sorted(lexemes, key=lambda lp: (lp[0].encode("utf-8"), lp[1])):
        positions = grouped.setdefault(lexeme, [])
        if not positions:
            positions.append(position)
        elif (len(positions) < MAX_POSITIONS_PER_LEXEME and positions[-1] != MAX_POSITION
              and positions[-1] != position):
            positions.append(position)
    return {lexeme: tuple(positions) for lexeme, positions in grouped.items()}


def tsvector_length(vector: TsVector) -> int:
    """cnt_length(): number of positions (a lexeme without positions counts 1)."""
    return sum(len(p) or 1 for p in vector.values())


# --------------------------------------------------------------------------- tsquery
# A lexeme, ("&", a, b), ("|", a, b), ("!", a) or ("<>", a, b, distance): a <distance> b, b exactly distance
# positions after a (phrase search; "<->" is distance 1)
Node = Union[str, tuple]
PHRASE = "<>"
PRIORITY = {"!": 4, PHRASE: 3, "&": 2, "|": 1}  # tsearch_op_priority


def children(node: tuple) -> tuple:
    """An operator node's operands: one for NOT, (left, right) for the others."""
    return node[1:2] if node[0] == "!" else node[1:3]


@dataclass(frozen=True)
class TsQuery:
    """A tsquery as a tree; ``root`` is None for the empty query (all stop words)."""

    root: Node | None

    @staticmethod
    def all_of(lexemes: list[str]) -> "TsQuery":
        return TsQuery(_chain("&", lexemes))

    @staticmethod
    def any_of(lexemes: list[str]) -> "TsQuery":
        return TsQuery(_chain("|", lexemes))

    @cached_property
    def operands(self) -> list[str]:
        """Operand lexemes left to right (as the query's text lists them), duplicates kept."""
        out: list[str] = []
        _collect(self.root, out)
        return out

    @property
    def top_operator(self) -> str | None:
        return self.root[0] if isinstance(self.root, tuple) else None

    @cached_property
    def sorted_unique_operands(self) -> list[str]:
        """Distinct operands in tsCompareString order (bytewise, a prefix first), as tsrank.c sorts them."""
        return sorted(set(self.operands), key=lambda s: s.encode("utf-8"))

    @cached_property
    def kind(self) -> str:
        """"and" / "or" when every operator is & / | (a plainto or OR query), else "mixed"."""
        ops = set()
        _operators(self.root, ops)
        return "and" if ops <= {"&"} else "or" if ops == {"|"} else "mixed"

    @cached_property
    def has_phrase(self) -> bool:
        ops = set()
        _operators(self.root, ops)
        return PHRASE in ops

    @cached_property
    def matches_without_operands(self) -> bool:
        """Whether a document holding none of the operands matches (a NOT makes that possible): then every
        document is a candidate, not only those in the operands' posting lists."""
        return self.root is not None and execute(self.root, lambda lexeme: None)

    def evaluate(self, present: Callable[[str], bool]) -> bool:
        """TS_execute with a plain existence check per operand (no phrase operators)."""
        return self.root is not None and _evaluate(self.root, present)

    def satisfied_by(self, lexemes: set[str] | dict) -> bool:
        """``evaluate`` over a set of present lexemes, with shortcuts for pure AND / OR queries; a query with
        phrase operators needs positions (a tsvector, ``matches``)."""
        if self.root is None:
            return False
        kind = self.kind
        if kind == "and":
            return all(op in lexemes for op in self.operands)
        if kind == "or":
            return any(op in lexemes for op in self.operands)
        if self.has_phrase:
            if not isinstance(lexemes, dict):
                raise ValueError("a phrase query needs lexeme positions: give a tsvector")
            return execute(self.root, lexemes.get)
        return _evaluate(self.root, lexemes.__contains__)

    def to_text(self) -> str:
        """tsquery text syntax (quoted lexemes, fully parenthesized), for casting to ::tsquery in PostgreSQL."""
        return "" if self.root is None else _text(self.root)

    def to_pg_text(self) -> str:
        """The text PostgreSQL's tsqueryout prints for this query (its infix(): parentheses by priority)."""
        return "" if self.root is None else _infix(self.root, -1, False)


def _chain(op: str, lexemes: list[str]) -> Node | None:
    if not lexemes:
        return None
    node: Node = lexemes[0]
    for lexeme in lexemes[1:]:
        node = (op, node, lexeme)
    return node


def _collect(node: Node | None, out: list[str]) -> None:
    if node is None:
        return
    if isinstance(node, str):
        out.append(node)
    else:
        for child in children(node):
            _collect(child, out)


def _operators(node: Node | None, out: set[str]) -> None:
    if isinstance(node, tuple):
        out.add(node[0])
        for child in children(node):
            _operators(child, out)


def _evaluate(node: Node, present: Callable[[str], bool]) -> bool:
    if isinstance(node, str):
        return present(node)
    op = node[0]
    if op == "&":
        return _evaluate(node[1], present) and _evaluate(node[2], present)
    if op == "|":
        return _evaluate(node[1], present) or _evaluate(node[2], present)
    if op == "!":
        return not _evaluate(node[1], present)
    raise ValueError(f"tsquery operator {op!r} needs positions; use execute()")


def _quote(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def _text(node: Node) -> str:
    if isinstance(node, str):
        return _quote(node)
    if node[0] == "!":
        return "!" + _text(node[1])
    op = node[0] if node[0] != PHRASE else f"<{node[3]}>"
    return f"( {_text(node[1])} {op} {_text(node[2])} )"


def _infix(node: Node, parent_priority: int, right_phrase: bool) -> str:
    """tsquery.c infix(): a node's text, parenthesized when its priority is below its parent's (or when it is
    a phrase on the right of a phrase: phrase operators do not associate)."""
    if isinstance(node, str):
        return _quote(node)
    op, priority = node[0], PRIORITY[node[0]]
    if op == "!":
        inner = "!" + _infix(node[1], priority, False)
        return f"( {inner} )" if priority < parent_priority else inner
    right = _infix(node[2], priority, op == PHRASE)
    left = _infix(node[1], priority, False)
    shown = op if op != PHRASE else ("<->" if node[3] == 1 else f"<{node[3]}>")
    text = f"{left} {shown} {right}"
    return f"( {text} )" if priority < parent_priority or (op == PHRASE and right_phrase) else text


# --------------------------------------------------------------------------- executing with positions
@dataclass
class _Match:
    """ExecPhraseData: where a (sub)query matches; with ``negate``, everywhere except there; ``width`` is the
    match's extent less one (positions are match ends)."""

    positions: list[int]
    negate: bool = False
    width: int = 0


_L_ONLY, _R_ONLY, _BOTH = 1, 2, 4


def _phrase_output(left: _Match, right: _Match, emit: int, loffset: int, roffset: int) -> list[int]:
    """TS_phrase_output: merge the two position lists (each shifted by its offset) as ``emit`` says."""
    out, li, ri = [], 0, 0
    lp, rp = left.positions, right.positions
    big = 1 << 62
    while li < len(lp) or ri < len(rp):
        if li < len(lp):
            lpos = lp[li] + loffset
        elif not emit & _R_ONLY:
            break
        else:
            lpos = big
        if ri < len(rp):
            rpos = rp[ri] + roffset
        elif not emit & _L_ONLY:
            break
        else:
            rpos = big
        position = 0
        if lpos < rpos:
            position = lpos if emit & _L_ONLY else 0
            li += 1
        elif lpos == rpos:
            position = rpos if emit & _BOTH else 0
            li += 1
            ri += 1
        else:
            position = rpos if emit & _R_ONLY else 0
            ri += 1
        if position > 0:
            out.append(position)
    return out


def _phrase_execute(node: Node, positions_of: Callable[[str], tuple[int, ...] | None]) -> _Match | None:
    """TS_phrase_execute (tsvector_op.c) for a document whose positions are known: a _Match, or None (TS_NO)."""
    if isinstance(node, str):
        positions = positions_of(node)
        return _Match(list(positions)) if positions else None
    op = node[0]
    if op == "!":
        inner = _phrase_execute(node[1], positions_of)
        if inner is None:
            return _Match([], negate=True)  # match nowhere -> everywhere
        if inner.positions:
            inner.negate = not inner.negate
            return inner
        return None  # matched everywhere -> nowhere (inner.negate with no positions)
    if op in (PHRASE, "&"):
        left = _phrase_execute(node[1], positions_of)
        if left is None:
            return None
        right = _phrase_execute(node[2], positions_of)
        if right is None:
            return None
        if op == PHRASE:
            loffset, roffset, width = node[3] + right.width, 0, node[3] + left.width + right.width
        else:
            width = max(left.width, right.width)
            loffset, roffset = width - left.width, width - right.width
        if left.negate and right.negate:  # !L & !R = !(L | R)
            return _Match(_phrase_output(left, right, _BOTH | _L_ONLY | _R_ONLY, loffset, roffset), True, width)
        emit = _R_ONLY if left.negate else _L_ONLY if right.negate else _BOTH
        out = _phrase_output(left, right, emit, loffset, roffset)
        return _Match(out, False, width) if out else None
    # OR
    left = _phrase_execute(node[1], positions_of)
    right = _phrase_execute(node[2], positions_of)
    if left is None and right is None:
        return None
    left, right = left or _Match([]), right or _Match([])
    width = max(left.width, right.width)
    loffset, roffset = width - left.width, width - right.width
    if left.negate and right.negate:  # !L | !R = !(L & R)
        return _Match(_phrase_output(left, right, _BOTH, loffset, roffset), True, width)
    if left.negate:  # !L | R = !(L & !R)
        return _Match(_phrase_output(left, right, _L_ONLY, loffset, roffset), True, width)
    if right.negate:  # L | !R = !(!L & R)
        return _Match(_phrase_output(left, right, _R_ONLY, loffset, roffset), True, width)
    out = _phrase_output(left, right, _BOTH | _L_ONLY | _R_ONLY, loffset, roffset)
    return _Match(out, False, width) if out else None


def execute(node: Node, positions_of: Callable[[str], tuple[int, ...] | None]) -> bool:
    """TS_execute (tsvector_op.c, flags TS_EXEC_EMPTY): boolean above phrase operators, positions below them.
    ``positions_of(lexeme)`` gives the lexeme's positions where it is present, else None (or empty)."""
    if isinstance(node, str):
        return bool(positions_of(node))
    op = node[0]
    if op == "!":
        return not execute(node[1], positions_of)
    if op == "&":
        return execute(node[1], positions_of) and execute(node[2], positions_of)
    if op == "|":
        return execute(node[1], positions_of) or execute(node[2], positions_of)
    return _phrase_execute(node, positions_of) is not None


def matches(vector: TsVector, query: TsQuery) -> bool:
    """``vector @@ query``; the empty query matches nothing."""
    return query.satisfied_by(vector)


# --------------------------------------------------------------------------- ranking
def _f32(x: float) -> float:
    """Round a double to the nearest float4, as C does when storing into a ``float``."""
    return struct.unpack("f", struct.pack("f", x))[0]


def _weights32(weights: tuple[float, ...]) -> tuple[float, ...]:
    if len(weights) != 4 or any(w > 1.0 for w in weights):
        raise ValueError(f"weights: four values {{D, C, B, A}}, each at most 1, got {weights}")
    return tuple(_f32(w if w >= 0 else d) for w, d in zip(weights, DEFAULT_WEIGHTS))


def _sorted_unique_operands(query: TsQuery) -> list[str]:
    """SortAndUniqItems(): distinct operands in tsCompareString order (bytewise, shorter first on ties)."""
    return query.sorted_unique_operands


def word_distance(distance: int) -> float:
    if distance > 100:
        return _f32(1e-30)
    return _f32(1.0 / (1.005 + 0.05 * math.exp(_f32(distance) / 1.5 - 2)))


def _rank_or(w: tuple[float, ...], vector: TsVector, query: TsQuery) -> float:
    items = _sorted_unique_operands(query)
    res = 0.0
    wd = w[0]  # to_tsvector positions all have weight D
    for lexeme in items:
        positions = vector.get(lexeme)
        if positions is None:
            continue
        resj, wjm, jm = 0.0, -1.0, 0
        for j in range(len(positions) or 1):
            resj = _f32(resj + _f32(wd / ((j + 1) * (j + 1))))
            if wd > wjm:
                wjm, jm = wd, j
        res = _f32(res + _f32(_f32(wjm + resj) - _f32(wjm / ((jm + 1) * (jm + 1)))) / 1.64493406685)
    if items:
        res = _f32(res / len(items))
    return res


def _rank_and(w: tuple[float, ...], vector: TsVector, query: TsQuery) -> float:
    items = _sorted_unique_operands(query)
    if len(items) < 2:
        return _rank_or(w, vector, query)
    wd = w[0]
    ww = _f32(wd * wd)
    res = -1.0
    found: list[tuple[int, ...] | None] = [vector.get(lexeme) for lexeme in items]
    for i, post in enumerate(found):
        if post is None:
            continue
        for k in range(i):
            ct = found[k]
            if ct is None:
                continue
            for pi in post:
                for pk in ct:
                    dist = abs(pi - pk)
                    if dist:
                        curw = _f32(math.sqrt(_f32(ww * word_distance(dist))))
                        res = curw if res < 0 else _f32(1.0 - (1.0 - res) * (1.0 - curw))
    return res


def ts_rank(vector: TsVector, query: TsQuery, weights: tuple[float, ...] = DEFAULT_WEIGHTS,
            normalization: int = 0) -> float:
    """PostgreSQL's ``ts_rank([weights,] vector, query [, normalization])`` (see module doc)."""
    w = _weights32(weights)
    if not vector or query.root is None:
        return 0.0
    if query.top_operator in ("&", PHRASE):  # calc_rank: AND and phrase queries rank by proximity
        res = _rank_and(w, vector, query)
    else:
        res = _rank_or(w, vector, query)
    if res < 0:
        res = _f32(1e-20)
    if normalization & 1:
        res = _f32(res / (math.log(tsvector_length(vector) + 1) / math.log(2.0)))
    if normalization & 2:
        length = tsvector_length(vector)
        if length > 0:
            res = _f32(res / _f32(length))
    if normalization & 8:
        res = _f32(res / _f32(len(vector)))
    if normalization & 16:
        res = _f32(res / (math.log(len(vector) + 1) / math.log(2.0)))
    if normalization & 32:
        res = _f32(res / _f32(res + 1))
    return res


def _doc_representation(vector: TsVector, query: TsQuery) -> list[tuple[int, str]]:
    """get_docrep(): (position, lexeme) of every occurrence of a query lexeme, by position then lexeme."""
    occurrences = {(p, lexeme) for lexeme in set(query.operands) for p in vector.get(lexeme, ())}
    return sorted(occurrences, key=lambda pl: (pl[0], pl[1].encode("utf-8")))


def _covers(doc: list[tuple[int, str]], query: TsQuery):
    """Cover(): yield (begin, end) indexes into ``doc`` of successive covers, as tsrank.c finds them."""
    kind = query.kind
    if kind == "or":  # any one occurrence satisfies the query: every entry is its own cover
        yield from ((i, i) for i in range(len(doc)))
        return
    if kind == "and":
        needed = len(set(query.operands))
        satisfied = lambda seen: len(seen) == needed  # noqa: E731 (seen holds only query lexemes)
    elif query.has_phrase:  # phrases need the positions each lexeme has within the scanned window
        satisfied = lambda seen: execute(query.root, lambda lexeme: seen.get(lexeme))  # noqa: E731
    else:
        satisfied = lambda seen: query.evaluate(seen.__contains__)  # noqa: E731
    start, n = 0, len(doc)
    while start < n:
        seen: dict[str, list[int]] = {}  # lexeme -> its positions in the window, ascending
        end = None
        for idx in range(start, n):
            seen.setdefault(doc[idx][1], []).append(doc[idx][0])
            if satisfied(seen):
                end = idx
                break
        if end is None:
            return
        seen = {}
        begin = None
        for idx in range(end, start - 1, -1):  # scanning down: each position goes in front (reverseinsert)
            seen.setdefault(doc[idx][1], []).insert(0, doc[idx][0])
            if satisfied(seen):
                begin = idx
                break
        if begin is None:  # only with NOT: no cover ends here, retry one entry later
            start += 1
            continue
        yield begin, end
        start = begin + 1


def ts_rank_cd(vector: TsVector, query: TsQuery, weights: tuple[float, ...] = DEFAULT_WEIGHTS,
               normalization: int = 0) -> float:
    """PostgreSQL's ``ts_rank_cd([weights,] vector, query [, normalization])`` (see module doc)."""
    inverse_weights = [1.0 / w for w in _weights32(weights)]
    if query.root is None:
        return 0.0
    wdoc = sum_dist = prev_ext_pos = 0.0
    n_extent = 0
    if query.kind == "or" and not normalization & 4:
        # every occurrence is a one-entry cover worth 1 / (1 / w_D); the same sum without building covers
        occurrences = sum(len(vector.get(lexeme, ())) for lexeme in query.sorted_unique_operands)
        if not occurrences:
            return 0.0
        cpos = 1 / inverse_weights[0]
        for _ in range(occurrences):
            wdoc += cpos
        covers = ()
    else:
        doc = _doc_representation(vector, query)
        if not doc:
            return 0.0
        covers = _covers(doc, query)
    for begin, end in covers:
        p, q = doc[begin][0], doc[end][0]
        inv_sum = 0.0
        for _ in range(begin, end + 1):
            inv_sum += inverse_weights[0]  # weight D
        cpos = (end - begin + 1) / inv_sum
        noise = (q - p) - (end - begin)
        if noise < 0:
            noise = (end - begin) // 2
        wdoc += cpos / (1 + noise)
        cur_ext_pos = (q + p) / 2.0
        if n_extent > 0 and cur_ext_pos > prev_ext_pos:
            sum_dist += 1.0 / (cur_ext_pos - prev_ext_pos)
        prev_ext_pos = cur_ext_pos
        n_extent += 1
    if normalization & 1 and vector:
        wdoc /= math.log(tsvector_length(vector) + 1)
    if normalization & 2:
        length = tsvector_length(vector)
        if length > 0:
            wdoc /= length
    if normalization & 4 and n_extent > 0 and sum_dist > 0:
        wdoc /= n_extent / sum_dist
    if normalization & 8 and vector:
        wdoc /= len(vector)
    if normalization & 16 and vector:
        wdoc /= math.log(len(vector) + 1) / math.log(2.0)
    if normalization & 32:
        wdoc /= wdoc + 1
    return _f32(wdoc)


RANK_FUNCTIONS = {"ts_rank": ts_rank, "ts_rank_cd": ts_rank_cd}
