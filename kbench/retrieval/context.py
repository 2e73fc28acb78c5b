"""Context assembly (reference 001's ``contextAssembly``): what an LLM would actually be given.

In the ranking's order (production's: after fusion, rerank and grouping), each chunk is
- dropped when it overlaps a chunk kept before it (same document, character ranges intersect): overlapping
  chunkers and the parts of a decomposed question return the same text twice;
- otherwise added, with a metadata header when ``include_metadata`` (``[source: <doc id> <title>]``), while
  the whole context stays within ``max_context_tokens`` (4,000 in reference 001). Packing stops at the
  first chunk that does not fit, so the context is always a prefix of the deduplicated ranking (production
  order is kept; no smaller chunk jumps the queue).

Tokens are counted with the tokenizer of ``context.tokenizer`` (a catalogue model, MiniLM's WordPiece by
default), on the assembled text with its separators and headers. The assembled context becomes a second
``Run``; the pipeline scores it like the raw top-k (``context_*`` metrics) and logs its tokens per query.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from pydantic import Field

from kbench.embedding.models import resolve_model_path
from kbench.records import Chunk, Document, RankedHit, Run
from kbench.registry import StrictModel

SEPARATOR = "\n\n"


class ContextConfig(StrictModel):
    enabled: bool = False
    max_context_tokens: int = Field(4000, ge=1, description="token budget of the assembled context (reference 001)")
    drop_overlapping: bool = Field(True, description="drop a chunk overlapping one kept before it")
    include_metadata: bool = Field(False, description="a [source: ...] header line before each chunk")
    tokenizer: str = Field("all-MiniLM-L6-v2", description="catalogue model whose tokenizer counts tokens")


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
