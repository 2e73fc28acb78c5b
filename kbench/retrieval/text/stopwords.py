"""Stop word lists.

``ENGLISH_STOP_WORDS`` is Snowball's English list exactly as PostgreSQL ships it
(``share/tsearch_data/english.stop``, used by the ``english_stem`` dictionary): 127 lowercase words, in the
file's order. Both keyword legs use it, so "stopwords: english" means the same thing in ``bm25`` and
``postgres_fts``.
"""
from __future__ import annotations

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

STOP_WORD_LISTS: dict[str, frozenset[str]] = {
    "none": frozenset(),
    "english": frozenset(ENGLISH_STOP_WORDS),
}


def stop_words(name: str) -> frozenset[str]:
    try:
        return STOP_WORD_LISTS[name]
    except KeyError:
        raise ValueError(f"stopwords: unknown list {name!r}; allowed: {', '.join(STOP_WORD_LISTS)}") from None
