"""A text's language as an ISO 639-1 code (``fr``, ``en``, ``zh``), from py3langid's offline model (97 languages).

    detect_language("Comment déclarer un paramètre de chemin ?")          # "fr"
    detect_language("Path parameters", among=("fr", "en"))              # the likelier of the two

The model is read on first use and kept for the process (about 0.6 s): ``import kbench.language`` reads nothing,
so only a command that takes a census pays for it. Documentation pages carry code in every language's page;
fenced and inline code, URLs and HTML tags are taken out first, so a page is judged by its prose. A text with
fewer than ``MIN_LETTERS`` letters of prose is ``und`` (undetermined): a question made of an identifier
(``APIRouter``) says nothing about its language.

``judge`` gives the census what it weighs beside the code: the model's probability of the best language (py3langid
calls "Path parameters" Tagalog at 0.06 and a French sentence French at 0.99), the letters it had, and the script
they are written in (``script``: Latin, Cyrillic, CJK ...), which no model is needed to read.
"""
from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

UNDETERMINED = "und"
MIN_LETTERS = 3
MAX_PROSE_CHARS = 2000  # the first 2,000 characters of prose decide a page (every fastapi_docs page agreed)

_CODE = re.compile(r"```.*?(```|\Z)|~~~.*?(~~~|\Z)|`[^`\n]*`", re.S)
_NOISE = re.compile(r"https?://\S+|<[^>\n]{0,200}>|\{[^}\n]{0,200}\}|[#*_>|\[\]()=]")
_identifier = None


def identifier():
    """py3langid's identifier with probabilities normalised, loaded once per process."""
    global _identifier
    if _identifier is None:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier  # ~0.6 s: the census's own cost

        _identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    return _identifier


def prose(text: str, limit: int = MAX_PROSE_CHARS) -> str:
    """``text`` without code, URLs, tags and markup, its whitespace collapsed, cut at ``limit`` characters."""
    return " ".join(_NOISE.sub(" ", _CODE.sub(" ", text)).split())[:limit]


def detect_language(text: str, among: Sequence[str] | None = None) -> str:
    """The ISO 639-1 code of ``text``'s language, ``und`` when it has too little prose; ``among``: only these
    languages are candidates (a short question is judged among its corpus's languages)."""
    words = prose(text)
    if sum(ch.isalpha() for ch in words) < MIN_LETTERS:
        return UNDETERMINED
    if not among:
        return identifier().classify(words)[0]
    allowed = set(among)
    return next((code for code, _ in identifier().rank(words) if code in allowed), UNDETERMINED)


@dataclass(frozen=True)
class Judged:
    """What detection found in one text: the likeliest language (``und`` with too little prose), the model's
    probability of it, the letters of prose it read and their script."""

    code: str
    probability: float
    letters: int
    script: str | None


# scripts that write one language family together: Japanese mixes kana and Han characters
_SCRIPT_GROUPS = {"HIRAGANA": "CJK", "KATAKANA": "CJK", "CJK": "CJK", "IDEOGRAPHIC": "CJK"}


def script(text: str) -> str | None:
    """The script most of ``text``'s letters are written in (``LATIN``, ``CYRILLIC``, ``CJK``, ``ARABIC`` ...), from
    the Unicode names of its letters; None without letters."""
    counts: Counter = Counter()
    for ch in text:
        if ch.isalpha():
            name = unicodedata.name(ch, "")
            first = name.split(" ", 1)[0] if name else ""
            counts[_SCRIPT_GROUPS.get(first, first)] += 1
    return counts.most_common(1)[0][0] if counts else None


def judge(text: str) -> Judged:
    """``text``'s likeliest language among all 97, with its probability, letters and script (see ``Judged``)."""
    words = prose(text)
    letters = sum(ch.isalpha() for ch in words)
    if letters < MIN_LETTERS:
        return Judged(UNDETERMINED, 0.0, letters, script(words))
    code, probability = identifier().classify(words)
    return Judged(code, float(probability), letters, script(words))


def detect_languages(texts: Iterable[str], among: Sequence[str] | None = None) -> list[str]:
    return [detect_language(t, among) for t in texts]
