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

Tokens are a chunk's text (``Chunk.text``, what is embedded and what a reader gets) counted without special
tokens by one tokenizer for every config: ``BUDGET_TOKENIZER``, all-MiniLM-L6-v2's (BERT's uncased WordPiece, about
four characters a token on English prose), whatever model embeds. A budget is what a reader is given, not what an
embedder reads, so two models compared at 500 tokens are given the same text; counted by each model's own
tokenizer they were not (and a model with no tokenizer of its own, a static model or an ONNX file, had none to
count with). ``evaluation.budget_tokenizer`` names another model's tokenizer (your LLM's vocabulary, say); it is
loaded before a run or a sweep starts (``--dry-run`` too), so a name that has none fails in seconds. The counts come
in as a mapping chunk id -> tokens, so this module needs no model (kbench.pipeline counts them).

A sweep that compares chunk sizes on a top-k headline is the trap above: ``chunk_size_lines`` says so beside its
pick and offers the budget metric (kbench/sweep/summary.py, kbench gate).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from kbench.evaluation.spans import chunk_ranges, intersection_length, span_ranges, total_length
from kbench.records import Chunk, Span

BUDGET_TOKENIZER = "all-MiniLM-L6-v2"  # whose tokenizer counts every config's budget tokens (BERT uncased WordPiece)
BUDGET_METRIC = "span_recall_at_budget_{n}"  # what a chunk-size comparison is offered (span sets; doc_... otherwise)
OFFERED_BUDGET = 500  # tokens: the budget offered when a sweep measured none


def budget_tokenizer(configured: str | None) -> str:
    """The model whose tokenizer counts budget tokens: ``evaluation.budget_tokenizer``, else ``BUDGET_TOKENIZER``
    (the same for every embedding model, so budget metrics compare across models)."""
    return configured or BUDGET_TOKENIZER


def budget_words(configured: str | None) -> str:
    """How a run's budget tokens were counted, for its lines: ``counted by all-MiniLM-L6-v2's tokenizer, the same for
    every model``."""
    name = budget_tokenizer(configured)
    return f"counted by {name}'s tokenizer" + (", the same for every model" if configured is None else
                                                " (evaluation.budget_tokenizer)")


def is_budget_metric(metric: str) -> bool:
    return "_at_budget_" in metric


def chunk_size_lines(sizes: dict[str, str], headline: str, pick: str | None, budget_means: dict[str, dict[str, float]],
                     command: str) -> list[str]:
    """Beside a pick on a top-k headline among configs that chunk differently (``sizes``: label -> its chunking in
    words, ``chunk_size 1000`` or ``strategy markdown, chunk_size 2000``, said once per distinct chunking): the
    warning, and the budget metric's own ranking when the runs measured one (``budget_means``: metric -> label ->
    mean), else the command that measures it. [] when the headline is a budget metric or every config chunks alike."""
    if is_budget_metric(headline) or len(set(sizes.values())) < 2:
        return []
    counts: dict[str, int] = {}
    for size in sizes.values():
        counts[size] = counts.get(size, 0) + 1
    shown = "; ".join(f"{size}: {n} config{'s' if n > 1 else ''}" if len(counts) < len(sizes) else size
                      for size, n in counts.items())
    lines = [f"  warning: these configs chunk differently ({shown}) and {headline} counts chunks, not tokens: "
             "longer chunks hold more of an answer in the same top k and cost a reader more, so a top-k headline "
             "favours them (docs/tutorials/comparing-chunkers.md)"]
    if not budget_means:
        lines.append(f"  compare them at a token budget: {command}")
        return lines
    metric = next(iter(budget_means))
    means = budget_means[metric]
    order = sorted(means, key=lambda label: -means[label])
    best = order[0]
    if pick in means:
        better = [label for label in order if means[label] > means[pick] + 1e-12]  # a tie is no better
        ties = [label for label in order if label != pick and abs(means[label] - means[pick]) <= 1e-12]
        tied = f", tied with {', '.join(ties)}" if ties else ""
        where = (f"the pick {pick} is the best there too ({means[pick]:.4f}{tied})" if not better else
                 f"the pick {pick} is {_ordinal(len(better) + 1)} of {len(order)} ({means[pick]:.4f} against "
                 f"{best}'s {means[best]:.4f}{tied})")
    else:
        where = f"the best there is {best} ({means[best]:.4f})"
    lines.append(f"  at a token budget ({metric}): {where}; rank on it: {command}")
    return lines


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


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
