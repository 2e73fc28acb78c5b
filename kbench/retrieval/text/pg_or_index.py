"""ORed tsqueries ranked through an inverted index, bit-identical to ``ts_rank`` / ``ts_rank_cd`` per document.

An ORed query (``a | b | c``) matches most of a corpus, and ranking each match in Python is what made the
``or`` parser slow (28 ms per SciFact claim). For an OR query over ``to_tsvector`` positions (all weight D)
both rank functions depend on a document only through per-lexeme position counts:

- ``ts_rank_cd``: every occurrence is a one-entry cover worth ``1 / (1 / w_D)``, added in double once per
  occurrence, so the raw score is ``CD_TABLE[n]`` for ``n`` = the document's occurrences of query lexemes.
- ``ts_rank``: per distinct query lexeme, in tsrank.c's sorted order, ``res = f32(res + term(count))``, then
  ``f32(res / #distinct query lexemes)``.

The index keeps, per lexeme, the documents that hold it and their position counts; a query adds them up
with numpy in the same order and the same float widths as :mod:`pg_tsearch`, then applies the same
normalization with per-document constants computed by the same ``math`` calls, so every score is the
same float as the per-document path (a test compares them bit for bit on SciFact). Normalization bit 4
(cover distance, ``ts_rank_cd`` only) needs the covers themselves: such queries take the per-document path.
"""
from __future__ import annotations

import math

import numpy as np

from kbench.retrieval.text.pg_tsearch import (DEFAULT_WEIGHTS, MAX_POSITIONS_PER_LEXEME, TsQuery, TsVector,
                                              _weights32, tsvector_length)


def _ts_rank_terms(wd: float, max_count: int) -> np.ndarray:
    """term(n) of _rank_or for a lexeme with n positions: f32(f32(wd + resj(n)) - wd) / 1.64493406685."""
    f32 = np.float32
    terms = np.zeros(max_count + 1, dtype=np.float64)
    resj = f32(0.0)
    for n in range(1, max_count + 1):
        j = n - 1
        resj = f32(float(resj) + float(f32(wd / ((j + 1) * (j + 1)))))
        terms[n] = float(f32(float(f32(wd + float(resj))) - float(f32(wd / 1)))) / 1.64493406685
    return terms


class OrRankIndex:
    """Per-lexeme postings with position counts, and per-document normalization constants."""

    def __init__(self, vectors: list[TsVector]):
        docs: dict[str, list[int]] = {}
        counts: dict[str, list[int]] = {}
        for i, vector in enumerate(vectors):
            for lexeme, positions in vector.items():
                docs.setdefault(lexeme, []).append(i)
                counts.setdefault(lexeme, []).append(len(positions))
        self.postings = {lexeme: (np.array(ids, dtype=np.int64), np.array(counts[lexeme], dtype=np.int64))
                         for lexeme, ids in docs.items()}
        self.n_docs = len(vectors)
        lengths = [tsvector_length(v) for v in vectors]
        uniques = [len(v) for v in vectors]
        self.length = np.array(lengths, dtype=np.float64)
        self.unique = np.array(uniques, dtype=np.float64)
        self.nonempty = self.unique > 0
        # the same math.log calls the per-document functions make (numpy's log may differ in the last bit)
        self.ln_length1 = np.array([math.log(n + 1) for n in lengths])
        self.log2_length1 = np.array([math.log(n + 1) / math.log(2.0) for n in lengths])
        self.log2_unique1 = np.array([math.log(n + 1) / math.log(2.0) for n in uniques])
        self.length32 = self.length.astype(np.float32).astype(np.float64)
        self.unique32 = self.unique.astype(np.float32).astype(np.float64)
        wd = _weights32(DEFAULT_WEIGHTS)[0]
        max_occurrences = max(lengths, default=0)
        cpos = 1 / (1.0 / wd)
        self.cd_table = np.zeros(max_occurrences + 1, dtype=np.float64)
        total = 0.0
        for n in range(1, max_occurrences + 1):  # sequential double additions, as the C loop does
            total += cpos
            self.cd_table[n] = total
        self.rank_terms = _ts_rank_terms(wd, MAX_POSITIONS_PER_LEXEME)

    @staticmethod
    def handles(query: TsQuery, rank_function: str, normalization: int) -> bool:
        """Whether this index reproduces the per-document path for the query and rank settings."""
        return query.kind == "or" and query.root is not None and not (
            rank_function == "ts_rank_cd" and normalization & 4)

    def search(self, query: TsQuery, rank_function: str, normalization: int,
               mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(matching document ids ascending, their scores as float64 holding float4 values)."""
        lexemes = query.sorted_unique_operands
        present = [self.postings[lexeme] for lexeme in lexemes if lexeme in self.postings]
        if not present:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        touched = np.zeros(self.n_docs, dtype=bool)  # @@: documents holding any query lexeme
        for ids, _ in present:
            touched[ids] = True
        found = np.flatnonzero(touched)
        if mask is not None:
            found = found[mask[found]]
        if rank_function == "ts_rank_cd":
            occurrences = np.zeros(self.n_docs, dtype=np.int64)
            for ids, counts in present:
                occurrences[ids] += counts
            return found, self._normalize_cd(self.cd_table[occurrences[found]], found, normalization)
        res = np.zeros(self.n_docs, dtype=np.float32)
        for ids, counts in present:  # tsrank.c's order: f32 accumulation is order-sensitive
            res[ids] = (res[ids].astype(np.float64) + self.rank_terms[np.maximum(counts, 1)]).astype(np.float32)
        scores = (res[found].astype(np.float64) / len(lexemes)).astype(np.float32)
        return found, self._normalize_rank(scores, found, normalization)

    def _normalize_cd(self, wdoc: np.ndarray, d: np.ndarray, normalization: int) -> np.ndarray:
        if normalization & 1:
            wdoc = np.where(self.nonempty[d], wdoc / self.ln_length1[d], wdoc)
        if normalization & 2:
            wdoc = np.where(self.length[d] > 0, wdoc / np.where(self.length[d] > 0, self.length[d], 1), wdoc)
        if normalization & 8:
            wdoc = np.where(self.nonempty[d], wdoc / np.where(self.nonempty[d], self.unique[d], 1), wdoc)
        if normalization & 16:
            wdoc = np.where(self.nonempty[d], wdoc / self.log2_unique1[d], wdoc)
        if normalization & 32:
            wdoc = wdoc / (wdoc + 1)
        return wdoc.astype(np.float32).astype(np.float64)

    def _normalize_rank(self, res: np.ndarray, d: np.ndarray, normalization: int) -> np.ndarray:
        def f32(x: np.ndarray) -> np.ndarray:
            return x.astype(np.float32)

        if normalization & 1:
            res = f32(res.astype(np.float64) / self.log2_length1[d])
        if normalization & 2:
            positive = self.length[d] > 0
            res = np.where(positive, f32(res.astype(np.float64) / np.where(positive, self.length32[d], 1)), res)
        if normalization & 8:
            res = f32(res.astype(np.float64) / self.unique32[d])
        if normalization & 16:
            res = f32(res.astype(np.float64) / self.log2_unique1[d])
        if normalization & 32:
            res = f32(res.astype(np.float64) / f32(res.astype(np.float64) + 1).astype(np.float64))
        return res.astype(np.float64)
