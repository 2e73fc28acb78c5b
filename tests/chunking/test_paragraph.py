"""paragraph: blank-line paragraphs, short ones joined forward, long ones split."""
from __future__ import annotations

from kbench.chunking.paragraph import ParagraphParams, paragraph_chunks
from kbench.records import Document
from tests.chunking.corpora import chroma_document, uncovered


def test_one_chunk_per_paragraph_when_sizes_allow():
    text = "First paragraph here.\n\n  \nSecond one,\nwith two lines.\n\nThird."
    chunks = paragraph_chunks(Document("d", text), ParagraphParams(min_chars=0))
    assert [c.text for c in chunks] == ["First paragraph here.", "Second one,\nwith two lines.", "Third."]
    assert all(text[c.start:c.end] == c.text for c in chunks)


def test_short_paragraphs_join_the_next_and_long_ones_split():
    document = chroma_document("state_of_the_union")
    params = ParagraphParams(max_chars=500, min_chars=100)
    chunks = paragraph_chunks(document, params)
    assert all(len(c.text) <= 500 for c in chunks)
    assert all(document.text[c.start:c.end] == c.text for c in chunks)
    assert chunks[0].text.startswith("Good evening.") and "\n\nMr. Speaker" in chunks[0].text
    assert not uncovered(document, chunks)
    one_each = paragraph_chunks(document, ParagraphParams(max_chars=100_000, min_chars=0))
    assert len(one_each) == len([p for p in document.text.split("\n\n") if p.strip()])
