"""smart: Archon's smart_chunk_text, compared with a literal transcription of it on real text."""
from __future__ import annotations

import hashlib
import json.decoder

import pytest

from kbench.chunking.smart import SmartParams, smart_chunks
from kbench.records import Document
from tests.chunking.corpora import chroma_document, module_document, uncovered


def reference_smart_chunk_text(text: str, chunk_size: int = 600) -> list[str]:
    """The oracle: Archon's smart_chunk_text transcribed literally (self dropped)."""
    chunks = []
    start = 0
    text_length = len(text)

    while start < text_length:
        end = start + chunk_size

        if end >= text_length:
            chunk = text[start:].strip()
            if chunk:
                chunks.append(chunk)
            break

        chunk = text[start:end]

        code_block_pos = chunk.rfind("```")
        if code_block_pos != -1 and code_block_pos > chunk_size * 0.3:
            end = start + code_block_pos

        elif "\n\n" in chunk:
            last_break = chunk.rfind("\n\n")
            if last_break > chunk_size * 0.3:
                end = start + last_break

        elif ". " in chunk:
            last_period = chunk.rfind(". ")
            if last_period > chunk_size * 0.3:
                end = start + last_period + 1

        chunk = text[start:end].strip()
        if chunk:
            chunks.append(chunk)
        start = end

    if chunks:
        combined_chunks = []
        i = 0
        while i < len(chunks):
            current = chunks[i]
            while len(current) < 200 and i + 1 < len(chunks):
                i += 1
                current = current + "\n\n" + chunks[i]
            combined_chunks.append(current)
            i += 1
        chunks = combined_chunks

    return chunks


@pytest.mark.parametrize("corpus", ["chatlogs", "finance", "pubmed", "state_of_the_union", "wikitexts"])
def test_texts_equal_the_reference_on_chroma_corpora(corpus):
    document = chroma_document(corpus)
    chunks = smart_chunks(document, SmartParams())
    assert [c.text for c in chunks] == reference_smart_chunk_text(document.text)
    assert not uncovered(document, chunks)


@pytest.mark.parametrize("size", [150, 1000])
def test_texts_equal_the_reference_at_other_sizes(size):
    document = chroma_document("pubmed")
    document = Document("pubmed", document.text[:60_000])
    chunks = smart_chunks(document, SmartParams(chunk_size=size))
    assert [c.text for c in chunks] == reference_smart_chunk_text(document.text, size)


def test_offsets_cover_each_chunk_and_merges_are_joined_with_blank_lines():
    document = chroma_document("pubmed")  # pubmed has short lines, so merges happen (24 at the defaults)
    chunks = smart_chunks(document, SmartParams())
    merged = [c for c in chunks if c.metadata["merged_pieces"] > 1]
    assert merged
    for c in chunks:
        source = document.text[c.start:c.end]
        if c.metadata["merged_pieces"] == 1:
            assert source == c.text
        else:
            pieces = c.text.split("\n\n")
            assert source.startswith(pieces[0]) and source.endswith(pieces[-1])
    assert any(c.text not in document.text for c in merged), "merging should make some non-substring texts"
    assert max(len(c.text) for c in chunks) <= 600 + 200 + 1


def test_quirk_early_paragraph_break_blocks_the_sentence_rule():
    # a paragraph break at 50 (< 30% of 600) exists, so the elif takes the paragraph branch and cuts hard at
    # 600, although a sentence end sits at ~400
    text = "a" * 50 + "\n\n" + "b" * 350 + ". " + "c" * 600
    chunks = smart_chunks(Document("d", text), SmartParams())
    assert chunks[0].end == 600 and chunks[0].text == text[:600]
    assert [c.text for c in chunks] == reference_smart_chunk_text(text)


def test_quirk_early_code_fence_falls_through_to_the_paragraph_rule():
    text = "x" * 50 + "```" + "y" * 250 + "\n\n" + "z" * 600
    chunks = smart_chunks(Document("d", text), SmartParams())
    assert chunks[0].end == 303  # cut at the paragraph break, not at the early fence
    assert [c.text for c in chunks] == reference_smart_chunk_text(text)


def test_quirk_sentence_break_keeps_the_period_and_closing_fence_moves_on():
    text = "w" * 300 + ". " + "v" * 600
    chunks = smart_chunks(Document("d", text), SmartParams())
    assert chunks[0].text.endswith(".") and chunks[0].end == 301
    fenced = "intro " * 40 + "\n```python\nprint(1)\n```\n" + "after " * 120
    texts = [c.text for c in smart_chunks(Document("f", fenced), SmartParams())]
    assert texts == reference_smart_chunk_text(fenced)
    assert texts[1].startswith("```")  # the closing fence starts the next chunk


JSON_DECODER_SHA = "9f02654649816145"  # json/decoder.py of CPython 3.11, on which the pins were computed


def test_golden_pins_on_the_json_decoder_module():
    document = module_document(json.decoder)
    digest = hashlib.sha256(document.text.encode()).hexdigest()[:16]
    assert digest == JSON_DECODER_SHA, "json/decoder.py changed (another Python?): recompute the pins"
    chunks = smart_chunks(document, SmartParams())
    assert len(chunks) == 25
    assert [(c.start, c.end) for c in chunks[:4]] == [(0, 437), (443, 655), (661, 1179), (1182, 1699)]
    assert chunks[1].text == (
        "msg: The unformatted error message\n    doc: The JSON document being parsed\n"
        "    pos: The start index of doc where parsing failed\n    lineno: The line corresponding to pos\n"
        "    colno: The column corresponding to pos")
    assert chunks[-1].text.endswith('raise JSONDecodeError("Expecting value", s, err.value) from None\n'
                                    "        return obj, end")
    assert [c.text for c in chunks] == reference_smart_chunk_text(document.text)
