"""``fixed``: windows of ``chunk_size`` characters, each starting ``chunk_size - chunk_overlap`` after the last."""
from __future__ import annotations

from pydantic import Field, model_validator

from kbench.chunking.registry import CHUNKERS
from kbench.records import Chunk, Document
from kbench.registry import StrictModel, in_unit


class FixedParams(StrictModel):
    chunk_size: int = Field(1000, ge=1, description="characters per chunk", json_schema_extra=in_unit("characters"))
    chunk_overlap: int = Field(200, ge=0, description="characters shared by consecutive chunks",
                               json_schema_extra=in_unit("characters"))

    @model_validator(mode="after")
    def _overlap_below_size(self):
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError(
                f"chunk_overlap ({self.chunk_overlap}) must be smaller than chunk_size ({self.chunk_size})"
            )
        return self


@CHUNKERS.register("fixed", FixedParams)
def fixed_chunks(document: Document, params: FixedParams) -> list[Chunk]:
    """Fixed-size character windows with overlap (the GWI spec's fixed_size, Supabase's 1000/200)."""
    text, step = document.text, params.chunk_size - params.chunk_overlap
    chunks: list[Chunk] = []
    start = 0
    while start < len(text):
        end = min(start + params.chunk_size, len(text))
        if text[start:end].strip():
            chunks.append(Chunk(document.doc_id, len(chunks), start, end, text[start:end]))
        if end == len(text):
            break
        start += step
    return chunks
