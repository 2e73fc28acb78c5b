"""The graded relevance prompt (UMBRELA-style: 0-3, intent and trust weighed, a bare final score) and its parser."""
from __future__ import annotations

import re

from kbench.hashing import sha256_text

GRADES = {0: "nothing to do with the query", 1: "related to the query but does not answer it",
          2: "answers the query partly, or the answer is unclear or buried in other content",
          3: "is about the query and holds its exact answer"}
PROMPT = """Judge how relevant a passage is to a search query, on a scale from 0 to 3:
3 = the passage {g3};
2 = the passage {g2};
1 = the passage is {g1};
0 = the passage has {g0}.

Query: {{query}}

Passage:
{{passage}}

Think about what the person searching most likely wants, how well the passage meets that need, and how
trustworthy it is; weigh these and decide one final score. Do not explain. Answer in this form only:
##final score: <0, 1, 2 or 3>""".format(g3=GRADES[3], g2=GRADES[2], g1=GRADES[1], g0=GRADES[0])
PROMPT_SHA256 = sha256_text(PROMPT)
MAX_PASSAGE_CHARS = 4000
_FINAL = re.compile(r"final\s*score\s*[:=]?\s*\**\s*([0-3])\b", re.IGNORECASE)
_AFTER_FINAL = re.compile(r"final\s*score\b([^\n]*)", re.IGNORECASE)
_DIGIT = re.compile(r"(?<![\d.])([0-3])(?![\d.])")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def judge_prompt(query: str, passage: str) -> str:
    return PROMPT.replace("{query}", query).replace("{passage}", passage[:MAX_PASSAGE_CHARS])


def parse_grade(answer: str) -> int | None:
    """The grade after "final score", else the answer's only lone digit 0-3; None when there is none or several
    (the scale echoed back, "final score: 0, 1, 2, 3", as SmolLM2 often answers, is no grade)."""
    found = _FINAL.findall(answer)
    if found:
        numbers = _NUMBER.findall(_AFTER_FINAL.findall(answer)[-1])
        return int(found[-1]) if numbers == [found[-1]] else None
    digits = set(_DIGIT.findall(answer))
    return int(digits.pop()) if len(digits) == 1 else None
