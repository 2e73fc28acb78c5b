"""Markdown structure the no-LLM generators read: fenced code, headings, prose blocks and sentences.

Offsets are characters of the document text. Code fences (``` or ~~~) are skipped by everything here, so
a ``# comment`` in a bash block is not a heading and a line of code is not a sentence. Lines that are markup
only (admonition markers ``!!! note``, ``/// tip``, ``{* file.py *}`` includes) are not prose either.
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$")
_ABBREVIATION = re.compile(r"\b(?:e\.g|i\.e|etc|vs|cf|approx|resp|Mr|Mrs|Dr|Fig|No|al|Inc|Ltd|St)\.$",
                           re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*(?=\s)|[.!?][\"')\]]*$")
_NOT_PROSE = re.compile(r"^\s*(?:[|>]|#{1,6}\s|[-*+]\s|\d+[.)]\s|<|!\[|\[[^\]]*\]:|!!!|\?\?\?|///|\{\*|\{%|:::)")


@dataclass(frozen=True)
class Line:
    start: int
    end: int  # the newline excluded
    text: str
    in_code: bool


def lines(text: str) -> list[Line]:
    out, fence, pos = [], None, 0
    for raw in text.split("\n"):
        m = FENCE.match(raw)
        in_code = fence is not None or m is not None
        if m and fence is None:
            fence = m.group(1)[0] * 3
        elif m and fence is not None and m.group(1).startswith(fence) and not raw.strip()[len(m.group(1)):].strip():
            fence = None
        out.append(Line(pos, pos + len(raw), raw, in_code))
        pos += len(raw) + 1
    return out


@dataclass(frozen=True)
class Heading:
    level: int
    title: str
    line_start: int
    line_end: int  # after the newline (or the end of the text)


def headings(text: str) -> list[Heading]:
    out = []
    for ln in lines(text):
        if ln.in_code:
            continue
        m = HEADING.match(ln.text)
        if m:
            title = clean_inline(m.group(2))
            if title:
                out.append(Heading(len(m.group(1)), title, ln.start, min(ln.end + 1, len(text))))
    return out


_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")  # a markdown backslash escape: the character itself
_ATTRIBUTES = re.compile(r"\s*\{\s*[:#.][^{}]*\}")  # { #anchor }, {: .class }, {#id .note}
_FOOTNOTE = re.compile(r"\[\^[^\]]*\]")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_PROTECT = "\ue000"  # stands for an escaped character while the marks around it are removed


def clean_inline(text: str) -> str:
    """Markdown inline marks out: links and images keep their text (inline, reference and autolinks), code,
    emphasis and strike-through marks, HTML tags and comments, footnote marks and attribute lists
    (``{ #anchor }``) go, a backslash escape gives its character (``\\_private`` -> ``_private``) and HTML
    entities their character (``&amp;`` -> ``&``)."""
    escaped: list[str] = []

    def protect(m: re.Match) -> str:
        escaped.append(m.group(1))
        return f"{_PROTECT}{len(escaped) - 1}{_PROTECT}"

    text = _ESCAPED.sub(protect, text)
    text = _COMMENT.sub("", text)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # [text](url), ![alt](src)
    text = re.sub(r"!?\[([^\]^][^\]]*)\]\[[^\]]*\]", r"\1", text)  # [text][ref]
    text = _FOOTNOTE.sub("", text)
    text = _ATTRIBUTES.sub("", text)
    text = re.sub(r"<((?:https?|mailto):[^>\s]+)>", r"\1", text)  # <https://...>
    text = re.sub(r"<[^>]+>", "", text)
    text = re.sub(r"`+|~~|\*{1,3}|(?<!\w)_{1,3}|_{1,3}(?!\w)", "", text)  # snake_case keeps its underscores
    text = re.sub(f"{_PROTECT}(\\d+){_PROTECT}", lambda m: escaped[int(m.group(1))], text)
    return " ".join(html.unescape(text).split())


@dataclass(frozen=True)
class Block:
    start: int
    end: int


def prose_blocks(text: str) -> list[Block]:
    """Runs of consecutive prose lines (not code, heading, list, table, quote, HTML), blank-line separated."""
    out, start, end = [], None, None
    for ln in lines(text):
        prose = bool(ln.text.strip()) and not ln.in_code and not _NOT_PROSE.match(ln.text) and \
            not ln.text.startswith(("    ", "\t"))
        if prose:
            if start is None:
                start = ln.start
            end = ln.end
        elif start is not None:
            out.append(Block(start, end))
            start = None
    if start is not None:
        out.append(Block(start, end))
    return out


@dataclass(frozen=True)
class Sentence:
    start: int
    end: int


def sentences(text: str, block: Block) -> list[Sentence]:
    """Sentences of one block: they end at . ! ? (closing quotes/brackets kept) before whitespace, except
    after a common abbreviation, an initial or a number like "3." ; the last runs to the block's end."""
    out, start = [], block.start
    chunk = text[block.start:block.end]
    for m in _SENTENCE_END.finditer(chunk):
        end = block.start + m.end()
        piece = text[start:end]
        if _ABBREVIATION.search(piece) or re.search(r"(?:^|\s)(?:[A-Z]|\d+)\.$", piece):
            continue
        if piece.strip():
            lead = len(piece) - len(piece.lstrip())
            out.append(Sentence(start + lead, end))
        start = end
    tail = text[start:block.end]
    if tail.strip():
        lead = len(tail) - len(tail.lstrip())
        out.append(Sentence(start + lead, block.end - (len(tail) - len(tail.rstrip()))))
    return out


def section_of(position: int, heads: list[Heading]) -> str:
    """The heading path (" > "-joined titles) of the section holding ``position`` ("" before any heading)."""
    path: list[Heading] = []
    for h in heads:
        if h.line_start > position:
            break
        path = [p for p in path if p.level < h.level] + [h]
    return " > ".join(h.title for h in path)
