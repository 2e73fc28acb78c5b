"""fixed_tokens: windows of the embedding model's own tokens, cut at the tokenizer's offsets."""
from __future__ import annotations

import pytest

from kbench.chunking.fixed_tokens import FixedTokensParams, fixed_token_chunks, load_tokenizer, token_offsets
from kbench.records import Document
from tests.chunking.corpora import chroma_document, uncovered


def test_windows_hold_the_configured_number_of_tokens_with_overlap():
    document = Document("sotu", chroma_document("state_of_the_union").text[:20_000])
    params = FixedTokensParams(chunk_tokens=128, chunk_overlap=32)
    chunks = fixed_token_chunks(document, params)
    offsets = token_offsets(document.text, params.model)
    assert [c.metadata["first_token"] for c in chunks] == list(range(0, len(offsets), 96))[: len(chunks)]
    assert all(c.metadata["tokens"] == 128 for c in chunks[:-1])
    assert all(document.text[c.start:c.end] == c.text for c in chunks)
    # chunk k+1 starts at token 96 of chunk k: exactly the tokenizer's start offset of that token
    assert chunks[1].start == offsets[96][0]
    tokenizer = load_tokenizer(params.model)
    counts = [len(tokenizer(c.text, add_special_tokens=False)["input_ids"]) for c in chunks]
    assert max(counts) <= 130  # re-tokenizing a cut may shift a word piece or two at the edges
    assert not uncovered(document, chunks)


def test_overlap_must_be_below_the_window():
    with pytest.raises(ValueError, match="chunk_overlap"):
        FixedTokensParams(chunk_tokens=10, chunk_overlap=10)


def test_an_unknown_model_names_what_to_install():
    from kbench.embedding.models import ModelNotInstalledError

    load_tokenizer.cache_clear()
    with pytest.raises(ModelNotInstalledError, match="kbench models list|not a catalogue name"):
        fixed_token_chunks(Document("d", "some text"), FixedTokensParams(model="no-such-model"))
