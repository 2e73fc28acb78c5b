"""``heading`` (no LLM): a markdown section's heading becomes the question, its body the reference, and the
heading's words leave the indexed copy.

A heading alone is a poor question when it is generic: "Use cases", "Recap" or "Installation" head sections
of many pages, and "Learn more" or "With HTML" say nothing of their page, so the question cannot say which one it
means. ``context`` decides what a question carries:

- ``generic`` (default): the heading alone when it is specific; when it is generic, the document's title and the
  heading path down to it (``Stream Data > Use Cases``). A heading is generic when it has fewer than
  ``min_specific_words`` words (two words say little: "With HTML"), or when its title heads a section in at least
  ``generic_min_documents`` documents of the corpus (``corpus_context``), counted once per document; proposed
  without the corpus, every heading counts as generic;
- ``always``: the title and the heading path for every heading;
- ``never``: the heading alone.

``removal`` decides what leaves the indexed copy, so that a question cannot simply match its own heading:

- ``marker`` (default): the heading's words; its line stays as a bare marker of its level (``## Order matters``
  -> ``##``, an empty ATX heading), so every section keeps its place and a section-aware chunker (``markdown``)
  still cuts there. A set removes every candidate's heading (kbench/datasets/synthetic/build.py), most of a page's
  headings: with ``line`` the pages lost 89-98% of their structure and the markdown chunker was compared on pages
  that had almost none;
- ``line``: the whole heading line, as before issue 53.

Two sections asked by the same question (the same heading path on two pages) are one question with a reference in
each (the builder merges them): every page that answers counts.

The title is the document's level-1 heading when it opens the document, else its front matter's ``title:``,
else the document's own title when it is not a path (a BEIR title), else its file name (``stream-data.md``
-> ``Stream data``). Titles lose their inline marks and attribute lists (``{ #anchor }``). The body runs
from the line after the heading to the next heading of any level, trimmed; a section whose body has fewer
than ``min_body_words`` words (a heading straight above its first subheading) is not a question, nor is a
question of fewer than ``min_question_words`` words. Sections are stratified by their top-level section (the
first heading below the title).
"""
from __future__ import annotations

import re
from collections import Counter
from pathlib import PurePosixPath
from typing import Any

from kbench.datasets.code_qa import Edit
from kbench.datasets.synthetic.base import Proposal, Proposals, SyntheticError
from kbench.datasets.synthetic.prose import Heading, clean_inline, headings
from kbench.records import Document

NAME = "heading"
CONTEXTS = ("generic", "always", "never")
REMOVALS = ("marker", "line")
DEFAULTS = {"min_body_words": 8, "min_question_words": 2, "min_specific_words": 3, "context": "generic",
            "generic_min_documents": 2, "removal": "marker"}
NOT_HEADED = {"code", "commit", "openapi"}
FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?)\n---[ \t]*(?:\n|\Z)", re.DOTALL)
FRONT_TITLE = re.compile(r"^title:[ \t]*(.+?)[ \t]*$", re.MULTILINE)


def _key(title: str) -> str:
    return " ".join(title.lower().split())


def corpus_context(documents: list[Document]) -> dict[str, Any]:
    """What ``propose`` needs from the whole corpus: in how many documents each heading title heads a section."""
    counts: Counter = Counter()
    for d in documents:
        if d.doc_type not in NOT_HEADED:
            counts.update({_key(h.title) for h in headings(d.text)})
    return {"heading_documents": counts}


def document_title(document: Document, heads: list[Heading]) -> str:
    """The level-1 heading that opens the document (after any front matter), its front matter's title, its own
    title when that is no file path, or its file name."""
    front = FRONT_MATTER.match(document.text)
    opening = document.text[front.end() if front else 0:heads[0].line_start if heads else 0]
    if heads and heads[0].level == 1 and not opening.strip():
        return heads[0].title
    if front and (found := FRONT_TITLE.search(front.group(1))) and (title := clean_inline(found.group(1).strip("'\""))):
        return title
    if document.title and "/" not in document.title and not re.search(r"\.\w{1,5}$", document.title):
        return clean_inline(document.title)
    stem = PurePosixPath(document.doc_id).stem.replace("-", " ").replace("_", " ").strip()
    return stem[:1].upper() + stem[1:]


def propose(document: Document, params: dict[str, Any], corpus: dict[str, Any] | None = None) -> Proposals:
    p = {**DEFAULTS, **params}
    if p["context"] not in CONTEXTS:
        raise SyntheticError(f"heading: context {p['context']!r}; choose one of {', '.join(CONTEXTS)}")
    if p["removal"] not in REMOVALS:
        raise SyntheticError(f"heading: removal {p['removal']!r}; choose one of {', '.join(REMOVALS)}")
    found = Proposals()
    if document.doc_type in NOT_HEADED:
        found.rejected["not_a_markdown_document"] += 1
        return found
    text, heads = document.text, headings(document.text)
    if not heads:
        found.rejected["document_without_headings"] += 1
        return found
    title = document_title(document, heads)
    counts = (corpus or {}).get("heading_documents")
    path: list[Heading] = []
    for k, h in enumerate(heads):
        path = [x for x in path if x.level < h.level] + [h]
        body_end = heads[k + 1].line_start if k + 1 < len(heads) else len(text)
        body = text[h.line_end:body_end]
        if len(body.split()) < p["min_body_words"]:
            found.rejected["section_body_too_short"] += 1
            continue
        generic = counts is None or counts.get(_key(h.title), 0) >= p["generic_min_documents"]
        short = len(h.title.split()) < p["min_specific_words"]  # "With HTML", "Learn more": which page's?
        if p["context"] == "never" or (p["context"] == "generic" and not generic and not short):
            question = h.title
        else:
            titles = [x.title for x in path]
            question = " > ".join(titles if titles[0] == title else [title, *titles])
        if len(question.split()) < p["min_question_words"]:
            found.rejected["heading_path_too_short"] += 1
            continue
        start = h.line_end + (len(body) - len(body.lstrip()))
        end = body_end - (len(body) - len(body.rstrip()))
        stratum = path[1].title if len(path) > 1 and path[0].level == 1 else path[0].title
        found.items.append(Proposal(document.doc_id, question, start, end, removal(text, h, p["removal"]),
                                    stratum=stratum, group=f"heading@{h.line_start}",
                                    metadata={"heading_line": text[h.line_start:h.line_end].rstrip("\n"),
                                              "level": h.level, "generic": generic or short}))
    return found


def removal(text: str, h: Heading, how: str) -> Edit:
    """What leaves the indexed copy for heading ``h``: its whole line (``line``), or its words, the line kept as a
    bare marker of its level (``marker``: ``### Order matters`` -> ``###``)."""
    if how == "line":
        return Edit(h.line_start, h.line_end)
    newline = "\n" if text[h.line_start:h.line_end].endswith("\n") else ""
    return Edit(h.line_start, h.line_end, "#" * h.level + newline)
