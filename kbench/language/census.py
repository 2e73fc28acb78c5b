"""A language census of a dataset: the languages of its documents and of its questions, and how much of it the
embedder's languages cover.

    census = take_census(dataset.documents, dataset.queries)
    census_lines(census)     # ["languages of the documents: fr 96% (119), en 4% (5)", "languages of the questions: ..."]
    coverage = coverage_of(census, "all-MiniLM-L6-v2", ("en",))
    warn_uncovered(coverage)  # one line on stderr, once per process, when under half the documents are covered

The share is by documents (pages), not characters: what a reader counts. Short texts are where a detector errs:
py3langid calls "Path parameters" Tagalog and a page of one sentence and an API directive Latin or Spanish. So:

- A document is judged among all 97 languages when it has ``SHORT_DOCUMENT_LETTERS`` letters of prose or more and
  the model is at least ``CONFIDENT`` sure; a shorter or doubtful page is judged again among the languages of the
  pages that are long and sure (a prior toward the corpus's own languages), when it is written in their script.
- A question is judged among its corpus's languages and English (a question of three words is too short to be judged
  among 97), unless it is plainly foreign: written in a script no document uses (Japanese questions over English
  pages), or at least ``FOREIGN_LETTERS`` letters the model puts in another language with ``FOREIGN_CONFIDENCE``.
  Those are counted as their own language, so the census and the ``language`` slice never fold them into the
  corpus's. A question of that length the model leans elsewhere on with less confidence stays judged among the
  corpus's languages, and the census says how many look foreign (``Census.looks_foreign``).

Each question carries its result as ``language`` (``Census.question_languages``): the ``language`` slice
(kbench/evaluation/slices.py).
"""
from __future__ import annotations

import hashlib
import random
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from kbench.language.detect import UNDETERMINED, Judged, detect_language, judge
from kbench.records import Document, Query

COVERED_AT_LEAST = 0.5  # under half of the documents in the embedder's languages: the run warns
MEANINGFUL_SHARE = 0.1  # a language with fewer questions than this share (or MEANINGFUL_COUNT) is no slice of its own
MEANINGFUL_COUNT = 5
RUN_SAMPLE = 300  # documents a run's census reads (seeded sample): its shares, not every page, decide the warning
SHOWN = 5  # languages named per line; the rest are summed
SHORT_DOCUMENT_LETTERS = 200  # a page with less prose is judged among the languages of the longer pages
CONFIDENT = 0.5  # a page the model is less sure of than this, likewise
FOREIGN_LETTERS = 20  # a question needs this many letters to be counted as a language no document has ...
FOREIGN_CONFIDENCE = 0.9  # ... at this probability (in another script: any length)
LOOKS_FOREIGN = 0.5  # a question of FOREIGN_LETTERS the model puts elsewhere at this probability looks foreign

# PostgreSQL's text search configurations (and Snowball's stemmers) by ISO 639-1 code: the value that searches a
# language's words with the BM25 leg (retrieval.leg_params.bm25.language) or postgres_fts (config). ``none``:
# CJK text has no spaces to split words at and no stemmer.
TEXT_SEARCH_LANGUAGE = {
    "ar": "arabic", "ca": "catalan", "da": "danish", "de": "german", "el": "greek", "en": "english",
    "es": "spanish", "eu": "basque", "fi": "finnish", "fr": "french", "ga": "irish", "hu": "hungarian",
    "hy": "armenian", "id": "indonesian", "it": "italian", "lt": "lithuanian", "ne": "nepali", "nl": "dutch",
    "no": "norwegian", "pt": "portuguese", "ro": "romanian", "ru": "russian", "sr": "serbian", "sv": "swedish",
    "ta": "tamil", "tr": "turkish", "yi": "yiddish", "ja": "none", "ko": "none", "zh": "none",
}


@dataclass(frozen=True)
class Census:
    """Documents and questions per language (ISO 639-1 code, ``und`` undetermined), the largest first."""

    documents: dict[str, int]
    questions: dict[str, int]
    question_languages: dict[str, str] = field(default_factory=dict, compare=False)  # query id -> code
    documents_read: int = 0  # documents detected (a run reads a sample of RUN_SAMPLE)
    documents_total: int = 0
    foreign: dict[str, int] = field(default_factory=dict, compare=False)  # questions in a language no document has
    looks_foreign: dict[str, int] = field(default_factory=dict, compare=False)  # judged among the corpus's, though
    # the model leans to this language (FOREIGN_LETTERS letters, LOOKS_FOREIGN to FOREIGN_CONFIDENCE)

    @property
    def sampled(self) -> bool:
        return self.documents_read < self.documents_total

    def share(self, counts: dict[str, int], languages: Sequence[str]) -> float:
        """The share of ``counts`` in ``languages`` (0 when there is nothing to count)."""
        total = sum(counts.values())
        return sum(n for code, n in counts.items() if code in languages) / total if total else 0.0

    def question_slices(self) -> list[str]:
        """The questions' languages that are a meaningful share of the set (at least MEANINGFUL_SHARE and
        MEANINGFUL_COUNT questions): with two or more, metrics per language say something."""
        total = sum(self.questions.values())
        return [code for code, n in self.questions.items()
                if code != UNDETERMINED and n >= MEANINGFUL_COUNT and n >= MEANINGFUL_SHARE * total]


def _ordered(counter: Counter) -> dict[str, int]:
    return dict(sorted(counter.items(), key=lambda item: (-item[1], item[0])))


def candidate_languages(document_codes: Counter) -> list[str]:
    """The documents' languages a question is judged among: those of two documents or more (one page detected as
    Frisian is a misjudged page more often than a Frisian question), all of them when none has two."""
    found = {code: n for code, n in document_codes.items() if code != UNDETERMINED}
    repeated = [code for code, n in found.items() if n >= 2]
    return repeated or list(found)


def take_census(documents: Sequence[Document], queries: Sequence[Query], *, sample: int | None = None,
                seed: int = 0) -> Census:
    """Detect each document's language (or a seeded sample of ``sample`` of them; short or doubtful pages among the
    languages of the others) and each question's, among the documents' languages (candidate_languages) and English
    unless it is plainly foreign (see the module's docstring). A query whose metadata already says its ``language``
    keeps it."""
    key = _census_key(documents, queries, sample, seed)
    if key in _taken:  # a sweep's configs read one dataset: its census is taken once per process
        return _taken[key]
    chosen = list(documents)
    if sample is not None and len(chosen) > sample:
        chosen = random.Random(seed).sample(chosen, sample)
    judged = [judge(f"{d.title}\n{d.text}") for d in chosen]
    document_codes = Counter(document_languages(chosen, judged))
    among = sorted({*candidate_languages(document_codes), "en"}) if document_codes else None
    scripts = {j.script for j in judged if j.script is not None}
    question_languages, foreign, looks = {}, Counter(), Counter()
    for q in queries:
        if q.metadata.get("language"):
            question_languages[q.query_id] = str(q.metadata["language"])
            continue
        code, kind = question_language(q.text, among, scripts)
        question_languages[q.query_id] = code
        if kind == "foreign":
            foreign[code] += 1
        elif kind:
            looks[kind] += 1
    census = Census(_ordered(document_codes), _ordered(Counter(question_languages.values())), question_languages,
                    len(chosen), len(documents), _ordered(foreign), _ordered(looks))
    if len(_taken) >= KEPT_CENSUSES:
        _taken.pop(next(iter(_taken)))
    _taken[key] = census
    return census


def document_languages(documents: Sequence[Document], judged: Sequence[Judged]) -> list[str]:
    """Each document's language: the model's when the page is long enough and the model sure enough, else judged
    again among the languages of the pages that are (in their script); all of them when no page is."""
    sure = [j.letters >= SHORT_DOCUMENT_LETTERS and j.probability >= CONFIDENT for j in judged]
    prior = candidate_languages(Counter(j.code for j, ok in zip(judged, sure) if ok))
    prior_scripts = {j.script for j, ok in zip(judged, sure) if ok}
    out = []
    for d, j, ok in zip(documents, judged, sure):
        if ok or j.code == UNDETERMINED or not prior or j.script not in prior_scripts:
            out.append(j.code)
        else:
            out.append(detect_language(f"{d.title}\n{d.text}", prior))
    return out


def question_language(text: str, among: Sequence[str] | None, scripts: set[str]) -> tuple[str, str]:
    """A question's language and how it was told: ``("ja", "foreign")`` (a language no document has, counted as
    itself), ``("en", "")`` (judged among ``among``), ``("en", "es")`` (judged among ``among``, though the model
    leans to ``es``)."""
    if not among:
        return detect_language(text), ""
    found = judge(text)
    if found.code == UNDETERMINED or found.code in among:  # the likeliest of all is one of the corpus's
        return found.code, ""
    if found.script is not None and found.script not in scripts:
        return found.code, "foreign"  # Japanese over English pages: no prior of the corpus's applies
    if found.letters >= FOREIGN_LETTERS and found.probability >= FOREIGN_CONFIDENCE:
        return found.code, "foreign"
    leaning = found.code if found.letters >= FOREIGN_LETTERS and found.probability >= LOOKS_FOREIGN else ""
    return detect_language(text, among), leaning


KEPT_CENSUSES = 8
_taken: dict[str, Census] = {}


def _census_key(documents: Sequence[Document], queries: Sequence[Query], sample: int | None, seed: int) -> str:
    """A digest of everything a census reads (hashing is ~100x cheaper than detecting)."""
    digest = hashlib.sha256(f"{sample}|{seed}".encode())
    for d in documents:
        digest.update(f"\0{d.doc_id}\0{d.title}\0".encode())
        digest.update(d.text.encode("utf-8", "surrogatepass"))
    for q in queries:
        digest.update(f"\1{q.query_id}\0{q.text}\0{q.metadata.get('language') or ''}".encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def shares_text(counts: dict[str, int]) -> str:
    """``fr 96% (119), en 4% (5)``: at most SHOWN languages, the rest summed as ``N others``."""
    total = sum(counts.values())
    if not total:
        return "none"
    items = list(counts.items())
    parts = [f"{code} {n / total:.0%} ({n})" for code, n in items[:SHOWN]]
    rest = sum(n for _, n in items[SHOWN:])
    if rest:
        parts.append(f"{len(items) - SHOWN} others {rest / total:.0%} ({rest})")
    return ", ".join(parts)


def census_lines(census: Census) -> list[str]:
    """Two lines: the languages of the documents, of the questions; then, when some questions are in a language no
    document has or look like one, a line that says so."""
    sample = f" (a sample of {census.documents_read} of {census.documents_total})" if census.sampled else ""
    lines = [f"languages of the documents{sample}: {shares_text(census.documents)}",
             f"languages of the questions: {shares_text(census.questions)}"]
    if census.foreign:
        n = sum(census.foreign.values())
        lines.append(f"  {n} question{'s are' if n > 1 else ' is'} in a language no document has "
                     f"({_counts(census.foreign)}): counted as {'their' if n > 1 else 'its'} own, never as the "
                     "documents'")
    if census.looks_foreign:
        n = sum(census.looks_foreign.values())
        lines.append(f"  {n} question{'s look' if n > 1 else ' looks'} like another language "
                     f"({_counts(census.looks_foreign)}), not surely enough to count {'them' if n > 1 else 'it'} so: "
                     "judged among the documents' languages and English")
    return lines


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{code} {n}" for code, n in counts.items())


@dataclass(frozen=True)
class Coverage:
    """How much of a corpus an embedder's languages cover."""

    model: str
    languages: tuple[str, ...]
    covered_share: float  # of the documents
    covered_questions: float  # of the questions
    uncovered: dict[str, float]  # language -> share of the documents, the largest first

    @property
    def warns(self) -> bool:
        return bool(self.uncovered) and self.covered_share < COVERED_AT_LEAST

    def message(self) -> str:
        """One line: what the model covers, what it does not, and what would cover it."""
        main = next(iter(self.uncovered))
        others = ", ".join(f"{code} {share:.0%}" for code, share in list(self.uncovered.items())[:SHOWN])
        bm25 = TEXT_SEARCH_LANGUAGE.get(main)
        leg = (f"or the BM25 leg in the corpus's language (retrieval.leg_params.bm25.language: {bm25})" if bm25
               else f"or the BM25 leg (retrieval.leg_params.bm25.language: none for a language without a stemmer)")
        return (f"embedding model {self.model} covers {', '.join(self.languages)}: {self.covered_share:.0%} of the "
                f"documents (the rest: {others}), so its vectors rank text it was not trained on; to cover {main}, "
                f"embed with a multilingual model behind an OpenAI-compatible endpoint (embedding.provider: openai, "
                f"embedding.base_url, embedding.languages: [{main}]) {leg}")


def coverage_of(census: Census, model: str, languages: Sequence[str]) -> Coverage:
    total = sum(census.documents.values())
    uncovered = {code: n / total for code, n in census.documents.items()
                 if code not in languages and code != UNDETERMINED} if total else {}
    return Coverage(model, tuple(languages), census.share(census.documents, languages),
                    census.share(census.questions, languages), uncovered)


_warned: set[str] = set()


def warn_uncovered(coverage: Coverage) -> bool:
    """Print ``kbench: warning: ...`` on stderr when the embedder covers under half the documents, once per
    process for one message (a sweep's configs share it). True when the coverage warns."""
    if not coverage.warns:
        return False
    text = coverage.message()
    if text not in _warned:
        _warned.add(text)
        print(f"kbench: warning: {text}", file=sys.stderr)
    return True
