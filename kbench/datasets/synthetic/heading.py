"""``heading`` (no LLM): a markdown section's heading path becomes the question, its body the reference,
and the heading line leaves the indexed copy.

The path joins the titles from the top heading down (``Retries > Backoff``), inline marks removed. The
body runs from the line after the heading to the next heading of any level, trimmed; a section whose body
has fewer than ``min_body_words`` words (a heading straight above its first subheading) is not a question.
Sections are stratified by their top-level section (the first heading below the title).
"""
from __future__ import annotations

from typing import Any

from kbench.datasets.code_qa import Edit
from kbench.datasets.synthetic.base import Proposal, Proposals
from kbench.datasets.synthetic.prose import headings
from kbench.records import Document

NAME = "heading"
DEFAULTS = {"min_body_words": 8, "min_question_words": 2}
NOT_HEADED = {"code", "commit", "openapi"}


def propose(document: Document, params: dict[str, Any]) -> Proposals:
    p = {**DEFAULTS, **params}
    found = Proposals()
    if document.doc_type in NOT_HEADED:
        found.rejected["not_a_markdown_document"] += 1
        return found
    text, heads = document.text, headings(document.text)
    if not heads:
        found.rejected["document_without_headings"] += 1
        return found
    path: list = []
    for k, h in enumerate(heads):
        path = [x for x in path if x.level < h.level] + [h]
        body_end = heads[k + 1].line_start if k + 1 < len(heads) else len(text)
        body = text[h.line_end:body_end]
        if len(body.split()) < p["min_body_words"]:
            found.rejected["section_body_too_short"] += 1
            continue
        question = " > ".join(x.title for x in path)
        if len(question.split()) < p["min_question_words"]:
            found.rejected["heading_path_too_short"] += 1
            continue
        start = h.line_end + (len(body) - len(body.lstrip()))
        end = body_end - (len(body) - len(body.rstrip()))
        stratum = path[1].title if len(path) > 1 and path[0].level == 1 else path[0].title
        found.items.append(Proposal(document.doc_id, question, start, end, Edit(h.line_start, h.line_end),
                                    stratum=stratum, group=f"heading@{h.line_start}",
                                    metadata={"heading_line": text[h.line_start:h.line_end].rstrip("\n"),
                                              "level": h.level}))
    return found
