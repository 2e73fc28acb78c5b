"""Lexical leakage and near-duplicates: how much a question gives its answer away by shared words.

A generated question that copies its passage's words lets BM25 win by construction, so every question
carries two numbers:

- ``bm25_rank``: the rank (1 = first) of its gold passage when the question alone is scored with BM25
  (Lucene idf, k1 1.2, b 0.75; lowercased ``\\w+`` tokens, English stopwords out, Snowball stems) against
  every passage of the corpus. Passages are the corpus's paragraphs (blocks between blank lines, merged
  until at least ``MIN_PASSAGE_CHARS``); the gold passages are those overlapping a reference span (a whole
  document for document-level judgements). Ties count against the gold passage (rank = 1 + the number of
  passages scoring at least as high, minus itself); a gold passage sharing no term ranks last.
- ``word_overlap``: the share of the question's distinct content stems that occur in its reference text.

Near-duplicates: two questions whose sets of content stems have a Jaccard similarity of at least
``NEAR_DUPLICATE_JACCARD`` (or are equal once lowercased and stripped of punctuation).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from kbench.lazy import lazy_module

sp = lazy_module("scipy.sparse")  # half a second to import: `kbench datasets --help` reads this package's names

TOKEN = re.compile(r"\w+")
MIN_PASSAGE_CHARS = 200
NEAR_DUPLICATE_JACCARD = 0.8
# PostgreSQL's english.stop, the list kbench's BM25 leg uses, abridged to the words that matter here.
STOPWORDS = frozenset("""i me my myself we our ours ourselves you your yours yourself yourselves he him his himself
she her hers herself it its itself they them their theirs themselves what which who whom this that these those am
is are was were be been being have has had having do does did doing a an the and but if or because as until while
of at by for with about against between into through during before after above below to from up down in out on off
over under again further then once here there when where why how all any both each few more most other some such
no nor not only own same so than too very s t can will just don should now""".split())
STRATA_RANK = ((1, 1, "1"), (2, 10, "2-10"), (11, None, ">10"))
STRATA_OVERLAP = ((0.0, 0.5, "<0.5"), (0.5, 0.8, "0.5-0.8"), (0.8, None, ">=0.8"))


def _stemmer():
    import Stemmer  # PyStemmer, already a dependency of the BM25 leg

    return Stemmer.Stemmer("english")


_STEM = None


def content_terms(text: str) -> list[str]:
    """Lowercased ``\\w+`` tokens without stopwords, Snowball-stemmed (repeats kept)."""
    global _STEM
    if _STEM is None:
        _STEM = _stemmer()
    words = [w for w in TOKEN.findall(text.lower()) if w not in STOPWORDS]
    return _STEM.stemWords(words)


@dataclass(frozen=True)
class Passage:
    doc_id: str
    start: int
    end: int


def split_passages(doc_id: str, text: str, min_chars: int = MIN_PASSAGE_CHARS) -> list[Passage]:
    """Blocks between blank lines, each merged with the next until it holds ``min_chars`` characters."""
    out, start = [], None
    for m in re.finditer(r"\S(?:.*\S)?(?:\n(?!\s*\n).*\S)*", text):  # one block: lines up to a blank line
        if start is None:
            start = m.start()
        if m.end() - start >= min_chars:
            out.append(Passage(doc_id, start, m.end()))
            start = None
        last_end = m.end()
    if start is not None:
        if out and out[-1].doc_id == doc_id and last_end - start < min_chars:
            out[-1] = Passage(doc_id, out[-1].start, last_end)
        else:
            out.append(Passage(doc_id, start, last_end))
    return out


class PassageIndex:
    """BM25 over a corpus's passages (Lucene idf, k1 1.2, b 0.75), built once, scored per question."""

    def __init__(self, documents: dict[str, str], k1: float = 1.2, b: float = 0.75):
        self.passages: list[Passage] = []
        for doc_id, text in documents.items():
            self.passages.extend(split_passages(doc_id, text))
        self.by_doc: dict[str, list[int]] = {}
        for i, p in enumerate(self.passages):
            self.by_doc.setdefault(p.doc_id, []).append(i)
        vocabulary: dict[str, int] = {}
        rows, cols, vals, lengths = [], [], [], []
        for i, p in enumerate(self.passages):
            terms = content_terms(documents[p.doc_id][p.start:p.end])
            lengths.append(len(terms))
            counts: dict[int, int] = {}
            for t in terms:
                j = vocabulary.setdefault(t, len(vocabulary))
                counts[j] = counts.get(j, 0) + 1
            for j, c in counts.items():
                rows.append(i), cols.append(j), vals.append(c)
        n = len(self.passages)
        tf = sp.csr_matrix((np.asarray(vals, dtype=np.float64), (rows, cols)), shape=(n, len(vocabulary)))
        df = np.bincount(np.asarray(cols, dtype=np.int64), minlength=len(vocabulary)).astype(np.float64)
        self.idf = np.log(1.0 + (n - df + 0.5) / (df + 0.5))
        length = np.asarray(lengths, dtype=np.float64)
        norm = k1 * (1 - b + b * length / max(length.mean() if n else 1.0, 1e-9))
        tf = tf.tocoo()
        weights = tf.data * (k1 + 1) / (tf.data + norm[tf.row])
        self.weights = sp.csc_matrix((weights, (tf.row, tf.col)), shape=tf.shape)
        self.vocabulary = vocabulary

    def scores(self, question: str) -> np.ndarray:
        q = np.zeros(len(self.vocabulary))
        for t in content_terms(question):
            j = self.vocabulary.get(t)
            if j is not None:
                q[j] += self.idf[j]  # a repeated term counts again, as in the BM25 leg
        return self.weights @ q

    def gold_rows(self, spans: list[tuple[str, int, int]]) -> list[int]:
        """Passages overlapping any (doc_id, start, end); ``end`` < 0 means the whole document."""
        rows = []
        for doc_id, start, end in spans:
            for i in self.by_doc.get(doc_id, []):
                p = self.passages[i]
                if end < 0 or (p.start < end and start < p.end):
                    rows.append(i)
        return rows

    def gold_rank(self, question: str, spans: list[tuple[str, int, int]]) -> int:
        """1-based rank of the best gold passage; ties count against it; last when it shares no term."""
        gold = self.gold_rows(spans)
        if not gold:
            return len(self.passages)
        scores = self.scores(question)
        best = max(gold, key=lambda i: scores[i])
        if scores[best] <= 0:
            return len(self.passages)
        others = np.delete(scores, best)
        return int(1 + np.count_nonzero(others >= scores[best]))


def word_overlap(question: str, reference: str) -> float:
    """Share of the question's distinct content stems present in the reference (0 when it has none)."""
    asked = set(content_terms(question))
    if not asked:
        return 0.0
    return len(asked & set(content_terms(reference))) / len(asked)


def rank_stratum(rank: int) -> str:
    return next(label for low, high, label in STRATA_RANK if rank >= low and (high is None or rank <= high))


def overlap_stratum(overlap: float) -> str:
    return next(label for low, high, label in STRATA_OVERLAP if overlap >= low and (high is None or overlap < high))


def normalized(question: str) -> str:
    return " ".join(TOKEN.findall(question.lower()))


def near_duplicate_groups(questions: list[str], threshold: float = NEAR_DUPLICATE_JACCARD) -> list[int | None]:
    """For each question, the index of an earlier question it nearly duplicates (None if it is first).

    Candidate pairs come from an inverted index over stems, so a corpus of thousands stays fast."""
    terms = [frozenset(content_terms(q)) for q in questions]
    norms = [normalized(q) for q in questions]
    seen_norm: dict[str, int] = {}
    postings: dict[str, list[int]] = {}
    out: list[int | None] = []
    for i, (t, norm) in enumerate(zip(terms, norms)):
        match = seen_norm.get(norm)
        if match is None and t:
            shared: dict[int, int] = {}
            for term in t:
                for j in postings.get(term, ()):
                    shared[j] = shared.get(j, 0) + 1
            for j, common in sorted(shared.items()):
                if common / len(t | terms[j]) >= threshold:
                    match = j
                    break
        out.append(match)
        if match is None:
            seen_norm.setdefault(norm, i)
            for term in t:
                postings.setdefault(term, []).append(i)
    return out
