"""recursive: parity with LangChain's RecursiveCharacterTextSplitter on real text, exact offsets."""
from __future__ import annotations

import json.decoder

import pytest
from langchain_text_splitters import RecursiveCharacterTextSplitter

from kbench.chunking.recursive import RecursiveParams, recursive_chunks
from kbench.records import Document
from tests.chunking.corpora import chroma_document, demo_document, module_document, uncovered


def langchain_texts(text: str, params: RecursiveParams) -> list[str]:
    keep = {"start": "start", "end": "end", "none": False}[params.keep_separator]
    splitter = RecursiveCharacterTextSplitter(chunk_size=params.chunk_size, chunk_overlap=params.chunk_overlap,
                                              separators=params.separators, keep_separator=keep)
    return splitter.split_text(text)


@pytest.mark.parametrize("corpus", ["chatlogs", "state_of_the_union", "wikitexts", "pubmed"])
@pytest.mark.parametrize("size,overlap", [(1000, 200), (300, 50)])
def test_texts_equal_langchain_on_chroma_corpora(corpus, size, overlap):
    document = chroma_document(corpus)
    params = RecursiveParams(chunk_size=size, chunk_overlap=overlap)
    chunks = recursive_chunks(document, params)
    assert [c.text for c in chunks] == langchain_texts(document.text, params)
    assert all(document.text[c.start:c.end] == c.text for c in chunks)
    assert not uncovered(document, chunks)


@pytest.mark.parametrize("keep", ["end", "none"])
def test_other_separator_modes_equal_langchain(keep):
    document = demo_document("guides/workflows.md")
    params = RecursiveParams(chunk_size=200, chunk_overlap=40, keep_separator=keep)
    chunks = recursive_chunks(document, params)
    assert [c.text for c in chunks] == langchain_texts(document.text, params)
    assert all(document.text[c.start:c.end] == c.text for c in chunks)


def test_an_unsplittable_run_is_kept_whole_as_langchain_does():
    text = "short words here. " + "x" * 120 + " tail"
    params = RecursiveParams(chunk_size=50, chunk_overlap=10)
    chunks = recursive_chunks(Document("d", text), params)
    assert [c.text for c in chunks] == langchain_texts(text, params)
    long = [c for c in chunks if len(c.text) > 50]
    assert len(long) == 1 and long[0].text.strip() == "x" * 120


def test_golden_pins_on_the_json_decoder_module():
    document = module_document(json.decoder)
    chunks = recursive_chunks(document, RecursiveParams())
    assert len(chunks) == 18
    assert [(c.start, c.end) for c in chunks[:4]] == [(0, 655), (661, 1434), (1266, 2118), (2124, 3087)]
    assert chunks[1].text.startswith('"""\n    # Note that this exception is used from _json\n    def __init__')
    assert chunks[1].text.endswith("'b': '\\b', 'f': '\\f', 'n': '\\n', 'r': '\\r', 't': '\\t',\n}")
    assert [c.text for c in chunks] == langchain_texts(document.text, RecursiveParams())


def test_overlap_above_size_is_refused():
    with pytest.raises(ValueError, match="chunk_overlap"):
        RecursiveParams(chunk_size=100, chunk_overlap=200)
