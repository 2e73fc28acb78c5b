"""The ONNX runners' tokenizer reads a long text only as far as truncation keeps it, with the same encodings
as tokenizing the whole text (the parity reference: the tokenizers library on the whole texts)."""
from __future__ import annotations

import json

import pytest
from tokenizers import Tokenizer

from kbench.embedding.models import resolve_model_path
from kbench.embedding.onnx_runtime import load_tokenizer, text_prefix_with_tokens
from tests.conftest import SCIFACT

# Texts where counting words naively would be wrong: characters BERT's normalizer deletes (controls, format
# characters, combining marks) or turns into word breaks (CJK), vertical tabs that Python's split() treats as
# whitespace and BERT removes, words with no letter or digit, and a long query that truncation cuts too.
ADVERSARIAL = [
    "\u200b " * 300 + "gene " * 300,
    "a\x0bb\x0cc\x1cd " * 200,
    "\u0301\u0301 " * 200 + "e\u0301t\u00e9 " * 200,
    "\u4e2d\u6587\u5b57" * 150,
    "-- ... ;; " * 100 + "word " * 200,
    "\ufeff\x00\ufffd " * 150 + "tail words " * 150,
    "x" * 5000 + " y" * 300,
    " ".join(["supercalifragilistic"] * 200),
]


def whole_text_encodings(tokenizer_file, max_length, inputs):
    reference = Tokenizer.from_file(str(tokenizer_file))
    reference.no_padding()
    reference.enable_truncation(max_length)
    return reference.encode_batch(inputs)


def assert_same(ours, reference):
    assert len(ours) == len(reference)
    for a, b in zip(ours, reference):
        assert (a.ids, a.type_ids, a.attention_mask) == (b.ids, b.type_ids, b.attention_mask)


@pytest.fixture(scope="module")
def scifact_texts() -> tuple[list[str], list[str]]:
    with (SCIFACT / "corpus.jsonl").open(encoding="utf-8") as f:
        abstracts = [(d.get("title", "") + " " + d["text"]).strip() for d in map(json.loads, f)][:400]
    with (SCIFACT / "queries.jsonl").open(encoding="utf-8") as f:
        claims = [json.loads(line)["text"] for line in f][:400]
    return claims, abstracts


@pytest.mark.parametrize("model", ["all-MiniLM-L6-v2", "all-mpnet-base-v2"])
@pytest.mark.parametrize("max_length", [16, 128, 256])
def test_prefixes_encode_exactly_as_whole_texts(model, max_length, scifact_texts):
    tokenizer_file = resolve_model_path(model) / "tokenizer.json"
    ours = load_tokenizer(tokenizer_file, max_length)
    assert ours.reads_prefixes  # both are BERT WordPiece tokenizers, so the shortcut is really exercised
    claims, abstracts = scifact_texts
    texts = abstracts + ADVERSARIAL
    assert_same(ours.encode_batch(texts), whole_text_encodings(tokenizer_file, max_length, texts))
    # pairs, both orders: a long first text is truncated too under longest-first
    pairs = list(zip(claims, abstracts)) + [(c, t) for c, t in zip(claims, ADVERSARIAL)] + \
        [(t, c) for c, t in zip(claims, ADVERSARIAL)] + [(a, b) for a, b in zip(ADVERSARIAL, ADVERSARIAL[1:])]
    # lengths around half the budget on both sides, ties included: there the longer side takes the odd token
    half = (max_length - 3) // 2
    pairs += [("gene " * n, "cell " * m) for n in range(half - 3, half + 4)
              for m in [*range(n - 2, n + 3), max_length, 3 * max_length]]
    assert_same(ours.encode_batch(pairs), whole_text_encodings(tokenizer_file, max_length, pairs))


def test_the_prefix_is_short_when_the_text_is_long_and_whole_when_it_is_not():
    long_text = "alpha beta, gamma. " * 400
    prefix = text_prefix_with_tokens(long_text, 128)
    assert long_text.startswith(prefix) and len(prefix) < len(long_text) / 5
    assert text_prefix_with_tokens("only four words here", 128) == "only four words here"
    assert text_prefix_with_tokens("a b c d", 2) == "a b"
    assert text_prefix_with_tokens("-- x-y , z w", 2) == "-- x-y , z"  # words without a letter or digit don't count
