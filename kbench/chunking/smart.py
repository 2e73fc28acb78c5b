"""``smart``: Archon's smart_chunk_text, rule for rule, with exact offsets.

The algorithm walks the text in windows of ``chunk_size`` characters:
- If the rest of the text fits in a window, it is the last chunk.
- Otherwise the window is cut at a break point, looked for in this order, each only if it lies more than
  ``break_threshold * chunk_size`` characters into the window (30% of 600 = 180):
  1. the last code fence (```): the chunk ends just before the fence;
  2. the last paragraph break (``"\\n\\n"``): the chunk ends just before it;
  3. the last sentence end (``". "``): the chunk ends just after the period.
  With no usable break the window is cut hard at ``chunk_size``.
- Each chunk is ``.strip()``-ed; whitespace-only chunks are dropped (the walk still moves past them).
- Finally, a chunk shorter than ``merge_below`` (200) characters absorbs the chunks after it, joined with
  ``"\\n\\n"``, until it reaches ``merge_below`` or no chunk is left.

Quirks of the reference, reproduced on purpose:
- The three break rules form an if/elif chain. A code fence that exists but lies too early fails the
  first test, so the paragraph rule is tried next (falls through). But once the window contains a
  paragraph break at all, the elif branch is taken: if that break lies too early the window is cut hard
  at ``chunk_size`` and the sentence rule is never tried, even when a good sentence end exists.
- The 30% test is strict (``pos > 0.3 * chunk_size``) and measured from the window start.
- A fence break puts the fence at the start of the next chunk; when the last fence in the window closes a
  code block, that closing fence goes to the next chunk, which then begins with a stray ```.
- A paragraph break's ``"\\n\\n"`` and a sentence break's space start the next chunk and are stripped away.
- The last window takes everything left, so the final chunk may be up to ``chunk_size`` long and a tiny
  trailing chunk is never merged backwards: a short last chunk stays short.
- Merging joins with ``"\\n\\n"`` whatever separated the pieces in the source (a hard cut mid-word, one
  newline, a space), so a merged chunk's text need not be a substring of the document; its offsets are
  the covering range from the first piece's start to the last piece's end.
- Merging tests the joined length, so a merged chunk can reach ``merge_below - 1 + 2 + chunk_size``
  characters: the size limit of ``smart`` is ``chunk_size + merge_below + 1`` (801 at the defaults).
- Positions count Python characters (code points), not bytes or tokens.
"""
from __future__ import annotations

from pydantic import Field

from kbench.chunking.registry import CHUNKERS
from kbench.chunking.spans import Span, make_chunks, strip_span
from kbench.records import Chunk, Document
from kbench.registry import StrictModel, in_unit


class SmartParams(StrictModel):
    chunk_size: int = Field(600, ge=1, description="characters per window before stripping and merging",
                            json_schema_extra=in_unit("characters"))
    break_threshold: float = Field(0.3, ge=0, le=1, description="a break must lie past this fraction of the window",
                                   json_schema_extra=in_unit("share of the window"))
    merge_below: int = Field(200, ge=0, description="characters; shorter chunks absorb the following ones",
                             json_schema_extra=in_unit("characters"))


def smart_spans(text: str, params: SmartParams) -> list[Span]:
    """Stripped spans of the pre-merge chunks."""
    size, min_pos = params.chunk_size, params.chunk_size * params.break_threshold
    spans: list[Span] = []
    start, length = 0, len(text)
    while start < length:
        end = start + size
        if end >= length:
            span = strip_span(text, start, length)
            if span[1] > span[0]:
                spans.append(span)
            break
        window = text[start:end]
        fence = window.rfind("```")
        if fence != -1 and fence > min_pos:
            end = start + fence
        elif "\n\n" in window:
            paragraph = window.rfind("\n\n")
            if paragraph > min_pos:
                end = start + paragraph
        elif ". " in window:
            period = window.rfind(". ")
            if period > min_pos:
                end = start + period + 1
        span = strip_span(text, start, end)
        if span[1] > span[0]:
            spans.append(span)
        start = end
    return spans


def merge_small(text: str, spans: list[Span], merge_below: int) -> list[tuple[int, int, str, int]]:
    """``(start, end, text, pieces)``: each piece under ``merge_below`` chars absorbs the next ones."""
    merged = []
    i = 0
    while i < len(spans):
        first = i
        current = text[spans[i][0]:spans[i][1]]
        while len(current) < merge_below and i + 1 < len(spans):
            i += 1
            current = current + "\n\n" + text[spans[i][0]:spans[i][1]]
        merged.append((spans[first][0], spans[i][1], current, i - first + 1))
        i += 1
    return merged


@CHUNKERS.register("smart", SmartParams)
def smart_chunks(document: Document, params: SmartParams) -> list[Chunk]:
    """Archon's smart_chunk_text: 600-char windows cut at fence/paragraph/sentence, small ones merged."""
    merged = merge_small(document.text, smart_spans(document.text, params), params.merge_below)
    return make_chunks(document, ((s, e, t, {"merged_pieces": n}) for s, e, t, n in merged))
