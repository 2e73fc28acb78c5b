"""Budget-fair metrics: what a reader with ``n`` tokens of context gets from the ranking.

Top-k metrics reward long chunks: ten 2,000-character chunks hold more answer than ten 300-character ones,
and cost a reader (or an LLM's context window) seven times as much. Here the cut is a token budget instead
of a chunk count. For one question and a budget of ``n`` tokens:

- walk the ranking best first and keep each chunk whose tokens still fit in what is left of ``n``; stop at
  the first chunk that does not fit (a context is assembled in rank order: skipping a long chunk to take a
  shorter one further down would reorder the ranking). A first chunk longer than ``n`` keeps nothing.
- ``B_n`` = the union of the character ranges of the kept chunks (as the span metrics take ``C_k``).
- ``span_recall_at_budget_<n>    = |B_n ∩ R| / |R|`` (``R``: the union of the reference spans)
- ``span_precision_at_budget_<n> = |B_n ∩ R| / |B_n|`` (0 when nothing fits)
- ``doc_recall_at_budget_<n>``    = relevant documents with a kept chunk / relevant documents.

Tokens are a chunk's text (``Chunk.text``, what is embedded and what a reader gets) counted by a named
tokenizer without special tokens: ``evaluation.budget_tokenizer``, the embedding model's by default. The
counts come in as a mapping chunk id -> tokens, so this module needs no model (kbench.pipeline counts them).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from kbench.evaluation.spans import chunk_ranges, intersection_length, span_ranges, total_length
from kbench.records import Chunk, Span


def chunks_within_budget(token_counts: Sequence[int], budget: int) -> int:
    """How many of the ranked chunks (their token counts, best first) are kept under ``budget`` tokens."""
    spent = 0
    for i, tokens in enumerate(token_counts):
        if spent + tokens > budget:
            return i
        spent += tokens
    return len(token_counts)


def budget_metric_row(ranked: Sequence[Chunk], tokens: Mapping[str, int], budgets: Sequence[int],
                      spans: Sequence[Span] | None, relevant_docs: set[str]) -> dict[str, float]:
    """One query's ``*_at_budget_<n>`` columns. ``spans`` None (a document-qrels dataset): no span columns;
    a query without judged documents gets NaN doc recall (the mean skips it)."""
    counts = [tokens[c.chunk_id] for c in ranked]
    reference = span_ranges(spans) if spans is not None else None
    ref_len = total_length(reference) if reference is not None else 0
    row: dict[str, float] = {}
    for n in budgets:
        kept = ranked[: chunks_within_budget(counts, n)]
        if relevant_docs:
            row[f"doc_recall_at_budget_{n}"] = len(relevant_docs & {c.doc_id for c in kept}) / len(relevant_docs)
        else:
            row[f"doc_recall_at_budget_{n}"] = math.nan
        if reference is not None:
            if ref_len == 0:
                row[f"span_recall_at_budget_{n}"] = row[f"span_precision_at_budget_{n}"] = math.nan
                continue
            retrieved = chunk_ranges(kept)
            inter, size = intersection_length(retrieved, reference), total_length(retrieved)
            row[f"span_recall_at_budget_{n}"] = inter / ref_len
            row[f"span_precision_at_budget_{n}"] = inter / size if size else 0.0
    return row
