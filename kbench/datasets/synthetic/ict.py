"""``ict`` (inverse cloze task, no LLM): a sentence becomes the question, the sentences around it the
reference, and the sentence leaves the indexed copy.

Prose only: paragraphs of markdown, text, HTML, PDF or DOCX documents (code blocks, headings, lists and
tables are not prose). A candidate sentence has ``min_words``..``max_words`` words and ends with . ! or ?;
its paragraph needs another sentence to stay as the reference. The reference spans up to
``context_sentences`` sentences before and after it in the same paragraph, so after the removal it is the
passage the sentence came from. At most one question per paragraph, so removals never touch each other.
"""
from __future__ import annotations

from typing import Any

from kbench.datasets.code_qa import Edit
from kbench.datasets.synthetic.base import Proposal, Proposals
from kbench.datasets.synthetic.prose import clean_inline, headings, prose_blocks, section_of, sentences
from kbench.records import Document

NAME = "ict"
PROSE_TYPES = {"markdown", "text", "html", "pdf", "docx"}
DEFAULTS = {"context_sentences": 2, "min_words": 6, "max_words": 40}


def propose(document: Document, params: dict[str, Any]) -> Proposals:
    p = {**DEFAULTS, **params}
    found = Proposals()
    if document.doc_type not in PROSE_TYPES:
        found.rejected["not_a_prose_document"] += 1
        return found
    text, heads = document.text, headings(document.text)
    for block in prose_blocks(text):
        sents = sentences(text, block)
        if len(sents) < 2:
            found.rejected["paragraph_of_one_sentence"] += len(sents)
            continue
        stratum = section_of(block.start, heads)
        for i, s in enumerate(sents):
            question = clean_inline(text[s.start:s.end])
            words = len(question.split())
            if not question.endswith(("?", ".", "!")) or question.endswith(("..", ":.")):
                found.rejected["not_a_sentence"] += 1
                continue
            if words < p["min_words"]:
                found.rejected["sentence_too_short"] += 1
                continue
            if words > p["max_words"]:
                found.rejected["sentence_too_long"] += 1
                continue
            removal = Edit(s.start, sents[i + 1].start) if i + 1 < len(sents) else Edit(sents[i - 1].end, s.end)
            lo, hi = max(0, i - p["context_sentences"]), min(len(sents) - 1, i + p["context_sentences"])
            found.items.append(Proposal(document.doc_id, question, sents[lo].start, sents[hi].end, removal,
                                        stratum=stratum, group=f"paragraph@{block.start}",
                                        metadata={"sentence": i}))
    return found
