"""Stop word lists: ``none``, ``english``, ``lucene``, a language (``french``, ``german``, ``portuguese``,
``russian``, ``spanish``), or a file of one word per line.

- ``english``: Snowball's English list exactly as PostgreSQL ships it (``share/tsearch_data/english.stop``, used
  by the ``english_stem`` dictionary): 127 lowercase words, in the file's order. The default of both keyword
  legs, so "stopwords: english" means the same thing in ``bm25`` and ``postgres_fts``.
- ``lucene``: the 33 words of Lucene's and Elasticsearch's English analyzer
  (``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET``), which is also bm25s' ``"en"`` list (``bm25s/stopwords.py``,
  ``STOPWORDS_EN``, bm25s 0.3.16), so a leg given ``lucene`` removes what those tools remove.
- ``french``, ``german``, ``portuguese``, ``russian``, ``spanish``: PostgreSQL's own list of that language
  (``share/tsearch_data/<language>.stop``, used by its ``<language>_stem`` dictionary), shipped as package data
  in kbench/retrieval/text/stop_lists/ and read as PostgreSQL's readstoplist() reads it (one word a line,
  lowercased, blank lines skipped).
- a file: a path (relative to the current folder) to a UTF-8 text file, one word per line; blank lines and lines
  starting with ``#`` are skipped. It is read once when the config validates, at most ``MAX_FILE_BYTES``; any
  fault is one ``ValueError`` naming the file and the line. The run key hashes the list's words, not the path
  (``list_key``), so editing the file never reuses a finished run of the old list.

Words are compared after the analyzer's lowercasing, so a list is lowercased when the leg lowercases.
"""
from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path

from kbench.errors import UserError, quoted_token

ENGLISH_STOP_WORDS: tuple[str, ...] = (
    "i", "me", "my", "myself", "we", "our", "ours", "ourselves", "you", "your", "yours", "yourself",
    "yourselves", "he", "him", "his", "himself", "she", "her", "hers", "herself", "it", "its", "itself",
    "they", "them", "their", "theirs", "themselves", "what", "which", "who", "whom", "this", "that", "these",
    "those", "am", "is", "are", "was", "were", "be", "been", "being", "have", "has", "had", "having", "do",
    "does", "did", "doing", "a", "an", "the", "and", "but", "if", "or", "because", "as", "until", "while",
    "of", "at", "by", "for", "with", "about", "against", "between", "into", "through", "during", "before",
    "after", "above", "below", "to", "from", "up", "down", "in", "out", "on", "off", "over", "under", "again",
    "further", "then", "once", "here", "there", "when", "where", "why", "how", "all", "any", "both", "each",
    "few", "more", "most", "other", "some", "such", "no", "nor", "not", "only", "own", "same", "so", "than",
    "too", "very", "s", "t", "can", "will", "just", "don", "should", "now",
)

# Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET (Elasticsearch's `_english_`), bm25s' STOPWORDS_EN: 33 words
LUCENE_STOP_WORDS: tuple[str, ...] = (
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not",
    "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was",
    "will", "with",
)

# PostgreSQL's lists of the languages whose text search configurations are emulated (pg_tsearch.py)
POSTGRES_LIST_LANGUAGES = ("french", "german", "portuguese", "russian", "spanish")
_LIST_FOLDER = Path(__file__).with_name("stop_lists")


def postgres_stop_list(language: str) -> tuple[str, ...]:
    """PostgreSQL's ``<language>.stop``, in file order: each line stripped and lowercased, blank ones skipped."""
    text = (_LIST_FOLDER / f"{language}.stop").read_text(encoding="utf-8")
    return tuple(line.strip().lower() for line in text.splitlines() if line.strip())


STOP_WORD_LISTS: dict[str, frozenset[str]] = {
    "none": frozenset(),
    "english": frozenset(ENGLISH_STOP_WORDS),
    "lucene": frozenset(LUCENE_STOP_WORDS),
    **{language: frozenset(postgres_stop_list(language)) for language in POSTGRES_LIST_LANGUAGES},
}
MAX_FILE_BYTES = 1 << 20  # a stop list has tens to a few thousand words; a megabyte is far beyond any
FILE_HINT = ("give none, english, lucene, french, german, portuguese, russian, spanish, or a UTF-8 file of one "
             "word per line (at most 1 MiB)")


class StopWordsError(UserError, ValueError):
    """A stop word file kbench cannot use; the message names the file (and line) and the fix."""


def is_named_list(value: str) -> bool:
    return value in STOP_WORD_LISTS


def resolve_list_path(value: str) -> str:
    """A stop word file's absolute path (relative paths from the current folder), once checked readable:
    ``StopWordsError`` otherwise. Named lists come back as they are."""
    if is_named_list(value):
        return value
    path = Path(value).expanduser().resolve()
    read_list_file(str(path), *_stamp(path))
    return str(path)


def _stamp(path: Path) -> tuple[int, int]:
    try:
        stat = path.stat()
    except OSError:
        raise StopWordsError(f"{path}: no such file; {FILE_HINT}") from None
    return stat.st_mtime_ns, stat.st_size


@lru_cache(maxsize=32)
def read_list_file(path: str, mtime_ns: int = 0, size: int = 0) -> tuple[str, ...]:
    """The words of a stop word file, in file order (cached per path, modification time and size)."""
    file = Path(path)
    if not file.is_file():
        raise StopWordsError(f"{path}: not a file; {FILE_HINT}")
    if size > MAX_FILE_BYTES:
        raise StopWordsError(f"{path}: {size:,} bytes, more than a stop word list needs; {FILE_HINT}")
    with open(file, "rb") as f:
        raw = f.read(MAX_FILE_BYTES + 1)
    if len(raw) > MAX_FILE_BYTES:
        raise StopWordsError(f"{path}: more than {MAX_FILE_BYTES:,} bytes; {FILE_HINT}")
    if b"\0" in raw:
        raise StopWordsError(f"{path}: a binary file (it holds NUL bytes); {FILE_HINT}")
    try:
        text = raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise StopWordsError(f"{path}:{line}: not UTF-8; save the file as UTF-8 ({FILE_HINT})") from None
    words = []
    for n, line in enumerate(text.splitlines(), start=1):
        word = line.strip()
        if not word or word.startswith("#"):
            continue
        if len(word.split()) > 1:
            raise StopWordsError(f"{path}:{n}: {len(word.split())} words on one line ({quoted_token(word)}); "
                                 f"{FILE_HINT}")
        words.append(word)
    return tuple(words)


def stop_words(value: str, lowercase: bool = True) -> frozenset[str]:
    """The words of a named list or a file (lowercased when the leg lowercases)."""
    if is_named_list(value):
        return STOP_WORD_LISTS[value]
    path = Path(value)
    words = read_list_file(str(path), *_stamp(path))
    return frozenset(w.lower() for w in words) if lowercase else frozenset(words)


def list_key(value: str) -> str:
    """What the run key hashes for a list: its name, or a file's words (sorted, de-duplicated) by SHA-256, so
    the same list under another path gives the same key and an edited file another one."""
    if is_named_list(value):
        return value
    try:
        words = sorted(set(read_list_file(value, *_stamp(Path(value)))))
    except StopWordsError:
        return f"file unreadable: {os.path.basename(value)}"  # the run itself then fails with the message
    return "words:sha256:" + hashlib.sha256("\n".join(words).encode("utf-8")).hexdigest()[:16]
