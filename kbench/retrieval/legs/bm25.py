"""``bm25``: Okapi BM25 over a sparse document-term matrix.

score(q, d) = sum over query terms t (repeated terms count again) of
    idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))

with |d| the document's term count after analysis and avgdl its mean over the corpus. idf variants, for N
documents of which n contain t:

- ``lucene``: log(1 + (N - n + 0.5) / (n + 0.5)) (Lucene, Elasticsearch, bm25s' default); always > 0.
- ``okapi_epsilon`` (alias ``rank_bm25``): log((N - n + 0.5) / (n + 0.5)) as rank_bm25's BM25Okapi computes
  it, and every negative idf (terms in more than half the documents) replaced by epsilon * the mean idf over
  the whole vocabulary (epsilon 0.25 in rank_bm25).

The term weights tf*(k1+1)/(...) are computed once per corpus into a CSC matrix, so scoring a batch of
queries is one sparse product; documents sharing no term with the query score 0 and are not returned.

``tokenizer`` may map document types to tokenizers (``{code: code, default: regex}``; ``default``, else
``regex``, serves the other types): each chunk is analyzed by its document's tokenizer, all of them share
one index (one vocabulary, idf and average length), and a query is analyzed once per tokenizer, each
chunk scored with the query terms of its own tokenizer.

``language`` (english, french, german, portuguese, russian, spanish) picks the analyzer of that language: the
current Snowball stemmer of the language (PyStemmer, ``snowball_<language>``) and PostgreSQL's stop list of it,
so the leg stems "requêtes" as French. ``none`` is for text no stemmer serves, above all Chinese, Japanese and
Korean: no stemming, no stop words, and every CJK run as character bigrams (kbench/retrieval/text/tokenizers.py),
so a line of Japanese is many terms, not one. A ``stemmer`` or ``stopwords`` set away from its default
(snowball_english, english) beside ``language`` wins.
Unset, the leg analyzes as it always has (``stemmer`` and ``stopwords``, English by default) and keeps its run key.
"""
from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from kbench.lazy import lazy_module
from kbench.records import Query
from kbench.registry import StrictModel
from kbench.retrieval.contracts import Leg, LegResult, SearchContext
from kbench.retrieval.registry import LEGS
from kbench.retrieval.text.stemmers import LANGUAGES, STEMMER_NAMES, make_stemmer
from kbench.retrieval.text.stopwords import resolve_list_path
from kbench.retrieval.text.tokenizers import Analyzer

sp = lazy_module("scipy.sparse")  # half a second to import: a config naming bm25 is checked without it

TokenizerName = Literal["regex", "word", "postgres", "code"]
Language = Literal["english", *LANGUAGES, "none"]  # type: ignore[valid-type]


class BM25Params(StrictModel):
    late_knobs = {"keep_whole": True, "language": None}  # added later: at these, configs keep the run keys they had
    k1: float = Field(1.2, ge=0, description="term-frequency saturation (Lucene 1.2, rank_bm25 and bm25s 1.5)")
    b: float = Field(0.75, ge=0, le=1, description="document-length normalization, 0 = none, 1 = full")
    idf: Literal["lucene", "okapi_epsilon", "rank_bm25"] = Field(
        "lucene", description="lucene: log(1 + (N-n+0.5)/(n+0.5)); okapi_epsilon = rank_bm25: "
        "log((N-n+0.5)/(n+0.5)) with negative values replaced by epsilon * mean idf")
    epsilon: float = Field(0.25, ge=0, description="okapi_epsilon: floor for negative idfs, times the mean idf")
    tokenizer: TokenizerName | dict[str, TokenizerName] = Field(
        "regex", description="regex: matches of token_pattern; word: whitespace split; postgres: PostgreSQL's "
        "parser; code: identifiers kept and split (snake_case, camelCase, digits); or per document type: "
        "{code: code, default: regex}")
    token_pattern: str = Field(r"\w+", description="regex tokenizer: what one token matches")
    lowercase: bool = Field(True, description="lowercase tokens before stemming and stop words")
    stemmer: Literal[STEMMER_NAMES] = Field(  # type: ignore[valid-type]
        "snowball_english", description="snowball_english: current Snowball (PyStemmer); postgres_english: "
        "the Snowball English PostgreSQL compiles in; likewise snowball_<language> and postgres_<language> for "
        "french, german, portuguese, russian, spanish")
    stopwords: str = Field("english", description="none | english: PostgreSQL's english.stop (127 words) | lucene: "
                           "Lucene's, Elasticsearch's and bm25s' English list (33 words) | french | german | "
                           "portuguese | russian | spanish: PostgreSQL's list | a file, one word per line")
    language: Language | None = Field(
        None, description="the analyzer of a language: its current Snowball stemmer (snowball_<language>) and "
        "PostgreSQL's stop list of it; none: no stemming, no stop words, and runs of Chinese, Japanese or Korean "
        "as overlapping character bigrams (a line of Japanese is many terms, not one); a stemmer or stopwords "
        "other than its default wins; null = stemmer and stopwords alone (English by default)")
    keep_whole: bool = Field(True, description="code tokenizer: keep each identifier beside its parts; false: the "
                                               "parts only")

    @field_validator("stopwords")
    @classmethod
    def _known_list_or_file(cls, value: str) -> str:
        return resolve_list_path(value)  # a file: its absolute path, read and checked now

    @model_validator(mode="after")
    def _keep_whole_needs_code(self) -> BM25Params:
        tokenizers = set(self.tokenizer.values()) if isinstance(self.tokenizer, dict) else {self.tokenizer}
        if not self.keep_whole and "code" not in tokenizers:  # it would change nothing: say so, not ignore it
            raise ValueError(f"keep_whole: false applies to the code tokenizer, and this leg's is "
                             f"{', '.join(sorted(tokenizers))}; set tokenizer: code (or {{code: code, default: "
                             f"regex}}) or remove keep_whole")
        return self

    def analyzer(self, tokenizer: str | None = None) -> Analyzer:
        """The analyzer of ``tokenizer`` (default: the one tokenizer this leg names) with this leg's knobs."""
        if tokenizer is None and isinstance(self.tokenizer, dict):
            raise ValueError("tokenizer names one per document type; ask for one of them")
        return Analyzer(tokenizer or self.tokenizer, self.token_pattern, self.lowercase, self.analyzer_stopwords,
                        self.analyzer_stemmer, self.keep_whole, cjk=self.language == "none")

    @property
    def analyzer_stemmer(self) -> str:
        """``stemmer`` if set away from its default, else the language's (see the module doc). A config's leg
        params arrive as a dict with every default filled in, so "given" can only mean "not the default"."""
        if self.language is None or self.stemmer != BM25Params.model_fields["stemmer"].default:
            return self.stemmer
        return "none" if self.language == "none" else f"snowball_{self.language}"

    @property
    def analyzer_stopwords(self) -> str:
        """``stopwords`` if set away from its default, else the language's list."""
        if self.language is None or self.stopwords != BM25Params.model_fields["stopwords"].default:
            return self.stopwords
        return self.language  # none, english and each language name a list of stopwords.py

    def tokenizer_of(self, doc_type: str) -> str:
        if isinstance(self.tokenizer, str):
            return self.tokenizer
        return self.tokenizer.get(doc_type, self.tokenizer.get("default", "regex"))


def bm25_idf(document_frequency: np.ndarray, n_documents: int, variant: str, epsilon: float = 0.25) -> np.ndarray:
    """idf per term from its document frequency (see the module doc for each variant)."""
    n = document_frequency.astype(np.float64)
    if variant == "lucene":
        return np.log(1.0 + (n_documents - n + 0.5) / (n + 0.5))
    if variant in ("okapi_epsilon", "rank_bm25"):
        idf = np.log(n_documents - n + 0.5) - np.log(n + 0.5)  # the order rank_bm25 computes it in
        if idf.size:
            idf = np.where(idf < 0, epsilon * idf.mean(), idf)
        return idf
    raise ValueError(f"idf: unknown variant {variant!r}; allowed: lucene, okapi_epsilon, rank_bm25")


class BM25Index:
    """BM25 over pre-analyzed documents (lists of terms)."""

    def __init__(self, documents: list[list[str]], k1: float = 1.2, b: float = 0.75, idf: str = "lucene",
                 epsilon: float = 0.25):
        self.vocabulary: dict[str, int] = {}
        rows, cols = [], []
        for d, terms in enumerate(documents):
            for term in terms:
                cols.append(self.vocabulary.setdefault(term, len(self.vocabulary)))
                rows.append(d)
        n_docs, n_terms = len(documents), len(self.vocabulary)
        tf = sp.csr_matrix((np.ones(len(cols)), (rows, cols)), shape=(n_docs, n_terms))
        tf.sum_duplicates()  # (doc, term) pairs -> term frequencies
        doc_len = np.array([len(terms) for terms in documents], dtype=np.float64)
        avgdl = doc_len.mean() if n_docs and doc_len.sum() > 0 else 1.0
        self.idf = bm25_idf(np.bincount(tf.indices, minlength=n_terms), n_docs, idf, epsilon)
        norm = k1 * (1.0 - b + b * doc_len / avgdl)  # per document
        weights = tf.copy()
        row_of = np.repeat(np.arange(n_docs), np.diff(tf.indptr))
        weights.data = tf.data * (k1 + 1.0) / (tf.data + norm[row_of])
        self.weights = weights.tocsc()  # docs x terms
        self.n_documents = n_docs

    def query_matrix(self, queries: list[list[str]]) -> sp.csc_matrix:
        """terms x queries: idf(t) * (count of t in the query); unknown terms are dropped."""
        rows, cols = [], []
        for q, terms in enumerate(queries):
            for term in terms:
                t = self.vocabulary.get(term)
                if t is not None:
                    rows.append(t)
                    cols.append(q)
        counts = sp.csc_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(self.vocabulary), len(queries)))
        counts.sum_duplicates()
        counts.data *= self.idf[counts.indices]
        return counts

    def scores(self, queries: list[list[str]]) -> sp.csc_matrix:
        """docs x queries scores (sparse: only documents sharing a term with the query)."""
        return (self.weights @ self.query_matrix(queries)).tocsc()

    def top_k(self, queries: list[list[str]], k: int, mask: np.ndarray | None = None) -> list[LegResult]:
        """Per query, the k best (document, score) pairs, best first; ties go to the lower index."""
        return top_k_per_query(self.scores(queries), k, mask)


def top_k_per_query(scores: sp.csc_matrix, k: int, mask: np.ndarray | None = None) -> list[LegResult]:
    """Per column of a docs x queries score matrix, the k best positive (document, score) pairs."""
    results = []
    for q in range(scores.shape[1]):
        start, end = scores.indptr[q], scores.indptr[q + 1]
        docs, values = scores.indices[start:end], scores.data[start:end]
        keep = values > 0
        if mask is not None:
            keep &= mask[docs]
        docs, values = docs[keep], values[keep]
        results.append(top_k_pairs(docs, values, k))
    return results


def top_k_pairs(ids: np.ndarray, scores: np.ndarray, k: int) -> LegResult:
    """The k highest scores as (id, score), best first, ties broken by the lower id (also at the cut)."""
    if len(ids) > k:
        kth = np.partition(scores, len(scores) - k)[len(scores) - k]
        keep = scores >= kth
        ids, scores = ids[keep], scores[keep]
    order = np.lexsort((ids, -scores))[:k]
    return [(int(ids[i]), float(scores[i])) for i in order]


@LEGS.register("bm25", BM25Params)
class BM25Leg(Leg):
    """Okapi BM25 on a sparse term matrix (k1, b, idf variant, tokenizer, stemmer, stop words)."""

    needs_query_vectors = False
    scores_any_unit = True

    @staticmethod
    def preflight(params: BM25Params) -> None:
        make_stemmer(params.analyzer_stemmer)  # its package (PyStemmer, snowballstemmer) imports, or one line

    def __init__(self, context: SearchContext, params: BM25Params):
        self.params = params
        if isinstance(params.tokenizer, str):
            self.analyzer = params.analyzer()
            self.index = BM25Index(self.analyzer.analyze_many([c.text for c in context.chunks]),
                                   params.k1, params.b, params.idf, params.epsilon)
            return
        # one tokenizer per document type: analyze each chunk with its own, remember whose rows are whose
        names = [params.tokenizer_of(context.doc_types.get(c.doc_id, "text")) for c in context.chunks]
        self.analyzers = {name: params.analyzer(name) for name in dict.fromkeys(names)}
        self.rows = {name: np.array([t == name for t in names]) for name in self.analyzers}
        terms: list[list[str]] = [[] for _ in context.chunks]
        for name, analyzer in self.analyzers.items():
            rows = np.flatnonzero(self.rows[name])
            for row, analyzed in zip(rows, analyzer.analyze_many([context.chunks[i].text for i in rows])):
                terms[row] = analyzed
        self.index = BM25Index(terms, params.k1, params.b, params.idf, params.epsilon)

    def scores(self, queries: list[Query]) -> sp.csc_matrix:
        """chunks x queries BM25 scores (sparse: chunks sharing no term with the query are absent, i.e. 0)."""
        texts = [q.text for q in queries]
        if isinstance(self.params.tokenizer, str):
            return self.index.scores(self.analyzer.analyze_many(texts))
        scores = None
        for name, analyzer in self.analyzers.items():  # each chunk scored with its own tokenizer's query terms
            part = sp.diags(self.rows[name].astype(np.float64)) @ self.index.scores(analyzer.analyze_many(texts))
            scores = part if scores is None else scores + part
        scores = sp.csc_matrix(scores)
        scores.eliminate_zeros()
        return scores

    def search(self, queries: list[Query], query_vectors: np.ndarray | None, k: int,
               mask: np.ndarray | None = None) -> list[LegResult]:
        return top_k_per_query(self.scores(queries), k, mask)

    def score(self, queries: list[Query], query_vectors: np.ndarray | None,
              rows: list[np.ndarray]) -> list[np.ndarray]:
        """The BM25 score of each unit in ``rows`` (0 for a unit sharing no term with the query)."""
        scores = self.scores(queries)
        return [scores[:, [i]].toarray()[r, 0] for i, r in enumerate(rows)]
