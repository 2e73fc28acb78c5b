"""PostgreSQL's ``websearch_to_tsquery(config, text)``, emulated, and the OR query production code builds with it.

The common way application code asks PostgreSQL for "any of these words" is::

    websearch_to_tsquery('english', 'w1 or w2 or ...')   -- the question's words joined by " or "

``websearch_or_text`` builds that string (the words: the question split on whitespace, as ``str.split`` does) and
``websearch_to_tsquery`` parses it as PostgreSQL 18 does (src/backend/utils/adt/tsquery.c
``gettoken_query_websearch``, tsvector_parser.c ``gettoken_tsvector`` in web mode, to_tsany.c ``pushval_morph``,
tsquery_cleanup.c ``clean_stopword_intree``):

- operands are runs of characters up to a space, a double quote, ``:`` or an operator character ``!&|()<``;
  operator characters themselves are skipped; ``or`` (any case) between operands is OR, when something follows;
  two operands with nothing between them are ANDed (``x(y`` is ``x & y``); ``-`` before an operand negates it;
  text in double quotes is one operand;
- each operand goes through the configuration's parser and dictionaries; when it gives several lexemes (a
  compound like ``IL-6``, or quoted words), they are chained with the phrase operator ``<->`` (followed by),
  a stop word inside leaving a gap (``<2>``); an operand of only stop words is a placeholder, removed at the
  end with the operator that joined it (its phrase distance carried to the neighbouring phrase operator);
- operators bind NOT > phrase > AND > OR, so ``a b or c`` is ``(a & b) | c``.

So ``IL-6 or cells`` is ``'il' <-> '-6' | 'cell'``: the compound must appear as written, unlike ``query_parser:
or``, which ORs every lexeme of the question (``'il' | '-6' | 'cell'``). Matching (``@@``) and ranking of phrase
operators follow PostgreSQL too (kbench/retrieval/text/pg_tsearch.py ``execute``). The parity test compares
every SciFact claim's query with a real PostgreSQL's, as text, and the match sets and scores.
"""
from __future__ import annotations

from kbench.retrieval.text.pg_tsearch import PHRASE, PRIORITY, Node, TextSearchConfig, TsQuery

OPERATOR_CHARS = frozenset("!&|()<")  # ISOPERATOR (ts_utils.h)
_C_SPACE = frozenset(" \t\n\v\f\r")  # isspace() on one byte, as gettoken_query_websearch tests it
STOP = ("stop",)  # QI_VALSTOP: a placeholder for an operand that was only stop words


def websearch_or_text(question: str) -> str:
    """The string production code hands websearch_to_tsquery: the question's words joined by `` or ``."""
    return " or ".join(question.split())


def _is_or_operator(text: str, i: int) -> bool:
    """parse_or_operator: ``or`` (any case) not followed by ``-``, ``_`` or a letter or digit, with some
    non-space character somewhere after it."""
    if text[i:i + 2].lower() != "or":
        return False
    j = i + 2
    if j >= len(text) or text[j] in "-_" or text[j].isalnum():
        return False
    j += 1  # the character after "or" is skipped before looking for an operand
    while j < len(text):
        if text[j] not in _C_SPACE:
            return True
        j += 1
    return False


def _operand_end(text: str, i: int) -> int:
    """gettoken_tsvector in web mode from a non-space, non-operator character: the end of the operand (a
    space, a double quote, an operator character or ``:`` ends it; a ``:`` right at the start is kept)."""
    j = i + 1
    while j < len(text) and not (text[j].isspace() or text[j] == '"' or text[j] in OPERATOR_CHARS
                                 or text[j] == ":"):
        j += 1
    return j


def tokens(text: str):
    """gettoken_query_websearch: ("val", operand text) and ("op", "!" | "&" | "|") in order; ("stop",) when the
    text ends where an operand was due (after a NOT)."""
    i, n = 0, len(text)
    waiting_operand, first = True, True
    while True:
        if waiting_operand:
            if i < n and text[i] == "-":
                i += 1
                first = False
                yield ("op", "!")
                continue
            if i < n and text[i] == '"':
                end = text.find('"', i + 1)
                end = n if end < 0 else end
                yield ("val", text[i + 1:end])
                i = min(end + 1, n)
                waiting_operand = first = False
                continue
            if i < n and text[i] in OPERATOR_CHARS:
                i += 1
                first = False
                continue
            if i >= n:
                if not first:
                    yield STOP
                return
            if text[i] not in _C_SPACE:
                end = _operand_end(text, i)
                yield ("val", text[i:end])
                i = end
                waiting_operand = first = False
                continue
            i += 1
        else:
            if i >= n:
                return
            if _is_or_operator(text, i):
                i += 2
                waiting_operand = True
                yield ("op", "|")
                continue
            if text[i] in OPERATOR_CHARS:
                i += 1
                continue
            if text[i] not in _C_SPACE:
                waiting_operand = True
                yield ("op", "&")  # implicit AND between operands
                continue
            i += 1


def _push_operand(config: TextSearchConfig, text: str, out: list) -> None:
    """pushval_morph with the phrase operator: the operand's lexemes in RPN (values, then operators)."""
    words = config.lexemes(text)
    if not words:
        out.append(STOP)
        return
    position = placed = 0
    i = 0
    while i < len(words):
        if position > 0 and position + 1 < words[i][1]:
            while position + 1 < words[i][1]:  # a placeholder for each stop word skipped
                out.append(STOP)
                if placed:
                    out.append((PHRASE, 1))
                placed += 1
                position += 1
        position = words[i][1]
        variants = 0
        while i < len(words) and words[i][1] == position:  # one lexeme per position with these dictionaries
            out.append(words[i][0])
            if variants:
                out.append(("|",))
            variants += 1
            i += 1
        if placed:
            out.append((PHRASE, 1))
        placed += 1


def _rpn(config: TextSearchConfig, text: str) -> list:
    """makepol: the query in RPN, operators ordered by priority (NOT right-associative)."""
    out: list = []
    stack: list[str] = []
    for token in tokens(text):
        if token is STOP:
            out.append(STOP)
        elif token[0] == "val":
            _push_operand(config, token[1], out)
        else:
            op = token[1]
            while stack and (PRIORITY[op] <= PRIORITY[stack[-1]] if op != "!" else PRIORITY[op] < PRIORITY[stack[-1]]):
                out.append((stack.pop(),))
            stack.append(op)
    while stack:
        out.append((stack.pop(),))
    return out


def _tree(rpn: list) -> Node | None:
    nodes: list = []
    for item in rpn:
        if isinstance(item, str) or item is STOP:
            nodes.append(item)
        elif item[0] == "!":
            nodes.append(("!", nodes.pop()))
        else:
            right, left = nodes.pop(), nodes.pop()
            nodes.append((PHRASE, left, right, item[1]) if item[0] == PHRASE else (item[0], left, right))
    return nodes[0] if nodes else None


def _drop_stops(node) -> tuple:
    """clean_stopword_intree: (node without placeholders or None, ladd, radd), phrase distances of removed
    parts carried to the nearest phrase operator on their side."""
    if node is STOP:
        return None, 0, 0
    if isinstance(node, str):
        return node, 0, 0
    if node[0] == "!":
        child, ladd, radd = _drop_stops(node[1])
        return (None, ladd, radd) if child is None else (("!", child), ladd, radd)
    left, lladd, lradd = _drop_stops(node[1])
    right, rladd, rradd = _drop_stops(node[2])
    phrase = node[0] == PHRASE
    distance = node[3] if phrase else 0
    if left is None and right is None:
        add = lladd + distance + rladd if phrase else max(lladd, rladd)
        return None, add, add
    if left is None:
        return right, (lladd + distance + rladd if phrase else rladd), rradd
    if right is None:
        return left, lladd, (lradd + distance + rradd if phrase else lradd)
    if phrase:
        return (PHRASE, left, right, distance + lradd + rladd), lladd, rradd
    return (node[0], left, right), 0, 0


def websearch_to_tsquery(config: TextSearchConfig, text: str) -> TsQuery:
    """PostgreSQL's websearch_to_tsquery(config, text) (see the module doc)."""
    root = _tree(_rpn(config, text))
    if root is None:
        return TsQuery(None)
    return TsQuery(_drop_stops(root)[0])
