"""The prompts of the query pre-stages and how their answers are read."""
from __future__ import annotations

import re

EXPAND_PROMPT = ("Rewrite this search query so that a search engine finds the relevant documentation. Add "
                 "synonyms and related technical terms. Answer with the rewritten query only, on one line.\n"
                 "Query: {query}")
DECOMPOSE_PROMPT = ("Break this question into at most {max_parts} simpler search questions, one per line, "
                    "with nothing else.\nQuestion: {query}")
HYDE_PROMPT = "Write a short documentation passage that answers this question.\nQuestion: {query}"

NUMBERING = re.compile(r"^\s*(?:[-*•]|\d+[.)]|q\d+[:.)])\s*", re.IGNORECASE)


def expand_with_synonyms(query: str, synonyms: dict[str, list[str]]) -> str:
    """The query plus the synonyms of every listed term it contains (whole words, case-insensitive)."""
    added: list[str] = []
    lowered = query.lower()
    for term, alternatives in synonyms.items():
        if re.search(rf"(?<!\w){re.escape(term.lower())}(?!\w)", lowered):
            added.extend(a for a in alternatives if a.lower() not in lowered and a not in added)
    return f"{query} {' '.join(added)}" if added else query


def first_line(answer: str) -> str:
    return next((ln.strip() for ln in answer.splitlines() if ln.strip()), "")


def parse_parts(answer: str, max_parts: int) -> list[str]:
    """Sub-questions from the LLM's answer: non-empty lines, numbering and bullets removed, unique, capped."""
    parts: list[str] = []
    for line in answer.splitlines():
        text = NUMBERING.sub("", line).strip().strip('"')
        if len(text) >= 3 and text not in parts:
            parts.append(text)
    return parts[:max_parts]
