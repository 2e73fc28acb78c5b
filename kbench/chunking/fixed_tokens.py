"""``fixed_tokens``: windows of ``chunk_tokens`` tokens of the embedding model's own tokenizer.

Tokens come from the model's fast tokenizer (transformers ``AutoTokenizer`` loaded from the local model
folder, never a hub) with its offset mapping, so windows are cut exactly where the model's tokens start.
Windows start every ``chunk_tokens - chunk_overlap`` tokens. A chunk's range runs from its first token's
start to the start of the token after the window (the end of the text for the last window), stripped of
whitespace, so characters the tokenizer drops (control characters) are still covered.
Size limit: at most ``chunk_tokens`` tokens as the tokenizer counts them on the whole document.
The default, 250 tokens, fits all-MiniLM-L6-v2's 256-token window with its two special tokens.
"""
from __future__ import annotations

from functools import lru_cache

from pydantic import Field, model_validator

from kbench.chunking.registry import CHUNKERS
from kbench.chunking.spans import make_chunks, strip_span
from kbench.embedding.models import resolve_model_path
from kbench.records import Chunk, Document
from kbench.registry import StrictModel, in_unit


class FixedTokensParams(StrictModel):
    model: str = Field("all-MiniLM-L6-v2", description="whose tokenizer counts tokens (kbench models list)")
    chunk_tokens: int = Field(250, ge=1, description="tokens per chunk")
    chunk_overlap: int = Field(50, ge=0, description="tokens shared by consecutive chunks",
                               json_schema_extra=in_unit("tokens"))

    @model_validator(mode="after")
    def _overlap_below_size(self):
        if self.chunk_overlap >= self.chunk_tokens:
            raise ValueError(f"chunk_overlap ({self.chunk_overlap}) must be smaller than chunk_tokens ({self.chunk_tokens})")
        return self


@lru_cache(maxsize=4)  # loading a tokenizer takes ~0.1 s; chunkers are called once per document
def load_tokenizer(model: str):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(resolve_model_path(model)), use_fast=True, local_files_only=True)
    if not tokenizer.is_fast:
        raise RuntimeError(f"model {model!r} has no fast tokenizer (tokenizer.json); fixed_tokens needs its offsets")
    return tokenizer


def token_offsets(text: str, model: str) -> list[tuple[int, int]]:
    """Character ``(start, end)`` of every token of ``text`` (no special tokens, no truncation)."""
    encoding = load_tokenizer(model)(text, add_special_tokens=False, return_offsets_mapping=True,
                                     truncation=False, padding=False, verbose=False)
    return [(s, e) for s, e in encoding["offset_mapping"] if e > s]


@CHUNKERS.register("fixed_tokens", FixedTokensParams)
def fixed_token_chunks(document: Document, params: FixedTokensParams) -> list[Chunk]:
    """Windows of N model tokens with overlap, cut at the tokenizer's own character offsets."""
    text = document.text
    offsets = token_offsets(text, params.model)
    step = params.chunk_tokens - params.chunk_overlap
    pieces = []
    for first in range(0, len(offsets), step):
        last = min(first + params.chunk_tokens, len(offsets))
        lo = 0 if first == 0 else offsets[first][0]
        hi = offsets[last][0] if last < len(offsets) else len(text)
        s, e = strip_span(text, lo, hi)
        pieces.append((s, e, text[s:e], {"first_token": first, "tokens": last - first}))
        if last == len(offsets):
            break
    return make_chunks(document, pieces)
