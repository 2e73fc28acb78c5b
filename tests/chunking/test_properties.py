"""Properties of every chunker over generated markdown and code (hypothesis).

For each chunker: offsets in bounds, every non-whitespace character covered by some chunk's range, its
size limit respected (as stated in its module), and the same output on a second call. Sizes are set small
so that splitting and merging paths run. Example counts stay modest: CPU is shared.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbench.chunking.fixed_tokens import token_offsets
from kbench.chunking.registry import CHUNKERS
from kbench.records import Document
from tests.chunking.corpora import uncovered

WORDS = st.sampled_from(["the", "queue", "worker", "retries", "café", "jobs", "x", "API", "`code`", "a.b",
                         "https://example.com/x", "[link](http://y.io)", "naïve", "42", "—", "backoff"])


@st.composite
def sentences(draw, max_words=14):
    words = draw(st.lists(WORDS, min_size=1, max_size=max_words))
    return " ".join(words) + draw(st.sampled_from([".", "!", "?", ":", ""]))


@st.composite
def markdown_documents(draw):
    blocks = []
    for _ in range(draw(st.integers(1, 14))):
        kind = draw(st.sampled_from(["heading", "paragraph", "paragraph", "fence", "list", "long"]))
        if kind == "heading":
            blocks.append("#" * draw(st.integers(1, 4)) + " " + draw(sentences(max_words=4)))
        elif kind == "paragraph":
            blocks.append(" ".join(draw(st.lists(sentences(), min_size=1, max_size=5))))
        elif kind == "fence":
            lines = draw(st.lists(sentences(max_words=5), min_size=1, max_size=5))
            blocks.append("```python\n# comment\n" + "\n".join(lines) + "\n```")
        elif kind == "list":
            blocks.append("\n".join("- " + s for s in draw(st.lists(sentences(max_words=6), min_size=1, max_size=6))))
        else:
            blocks.append("".join(draw(st.lists(WORDS, min_size=20, max_size=60))))  # no spaces: unsplittable
    seps = draw(st.lists(st.sampled_from(["\n\n", "\n", "\n\n\n", "\n  \n"]), min_size=len(blocks), max_size=len(blocks)))
    return Document("gen.md", "".join(b + s for b, s in zip(blocks, seps)), title="Generated", url="gen.md",
                    doc_type="markdown")


IDENT = st.sampled_from(["alpha", "beta", "gamma", "delta", "run", "fetch", "value", "jobs"])


@st.composite
def python_statements(draw, indent):
    out = []
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["assign", "call", "comment", "if", "return"]))
        name, other = draw(IDENT), draw(IDENT)
        if kind == "assign":
            out.append(f"{indent}{name} = {other} + {draw(st.integers(0, 999))}")
        elif kind == "call":
            out.append(f"{indent}{name}({other!r}, '{draw(sentences(max_words=6))}')".replace("\\", ""))
        elif kind == "comment":
            out.append(f"{indent}# {draw(sentences(max_words=8))}")
        elif kind == "if":
            out.append(f"{indent}if {name}:\n{indent}    {other} = 1")
        else:
            out.append(f"{indent}return {name}")
    return out


@st.composite
def python_documents(draw):
    parts = ["import os", "from typing import Any"]
    for n in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["function", "class", "statement"]))
        if kind == "function":
            body = draw(python_statements("    "))
            parts.append(f"def {draw(IDENT)}_{n}(x, y=1):\n" + "\n".join(body))
        elif kind == "class":
            methods = []
            for m in range(draw(st.integers(0, 4))):
                decorator = "    @property\n" if draw(st.booleans()) else ""
                methods.append(f"{decorator}    def m{m}(self):\n" + "\n".join(draw(python_statements("        "))))
            doc = f'    """{draw(sentences())}"""'
            parts.append(f"class C{n}(Base):\n{doc}\n" + "\n\n".join(methods))
        else:
            parts.append(f"{draw(IDENT)} = {draw(st.integers(0, 9))}")
    return Document(f"gen_{draw(st.integers(0, 9))}.py", "\n\n\n".join(parts) + "\n", url="gen.py", doc_type="code")


def limit_ok(name: str, params, chunk, document) -> bool:
    """Each chunker's stated size limit."""
    text = chunk.text
    if name == "fixed":
        return chunk.end - chunk.start <= params.chunk_size
    if name == "smart":
        return len(text) <= params.chunk_size + params.merge_below + 1
    if name in ("recursive", "markdown"):
        return len(text) <= params.chunk_size or " " not in text.strip()
    if name == "paragraph":
        return len(text) <= params.max_chars or " " not in text.strip()
    if name == "fixed_tokens":
        tokens = [s for s, _ in token_offsets(document.text, params.model) if chunk.start <= s < chunk.end]
        return len(tokens) <= params.chunk_tokens
    if name == "ast":
        if chunk.metadata.get("fallback"):
            return len(text) <= 1000 or " " not in text.strip()
        code = document.text[chunk.start:chunk.end]
        return len(code) <= params.max_chars or not any(c in code for c in " \n")
    if name == "endpoint":  # generated docs are not OpenAPI: the recursive fallback's limit
        return len(text) <= 1000 or " " not in text.strip()
    return True  # none, by_type (checked through the chunkers it routes to)


KNOBS = {
    "fixed": {"chunk_size": 120, "chunk_overlap": 20},
    "smart": {"chunk_size": 150, "merge_below": 60},
    "recursive": {"chunk_size": 100, "chunk_overlap": 30},
    "markdown": {"chunk_size": 150, "chunk_overlap": 30, "max_depth": 2},
    "paragraph": {"max_chars": 120, "min_chars": 40},
    "fixed_tokens": {"chunk_tokens": 24, "chunk_overlap": 6},
    "ast": {"max_chars": 160, "granularity": "method"},
    "endpoint": {},
    "none": {},
    "by_type": {"chunker_params": {"ast": {"max_chars": 200}, "markdown": {"chunk_size": 200, "chunk_overlap": 0}}},
}
SAME_TEXT = {"fixed", "recursive", "markdown", "paragraph", "fixed_tokens"}  # text == document.text[start:end]


def check(name: str, document: Document) -> None:
    entry = CHUNKERS.get(name)
    params = entry.params(**KNOBS[name])
    chunks = entry.impl(document, params)
    text = document.text
    for c in chunks:
        assert 0 <= c.start < c.end <= len(text), (c.start, c.end)
        assert c.text.strip()
        assert limit_ok(name, params, c, document), (name, len(c.text), c.text[:80])
        if name in SAME_TEXT or (name == "smart" and c.metadata["merged_pieces"] == 1):
            assert text[c.start:c.end] == c.text
    assert [c.chunk_number for c in chunks] == list(range(len(chunks)))
    assert not uncovered(document, chunks), name
    again = entry.impl(document, params)
    assert [(c.start, c.end, c.text, c.metadata) for c in again] == [(c.start, c.end, c.text, c.metadata) for c in chunks]


FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)


@pytest.mark.parametrize("name", sorted(KNOBS))
@FAST
@given(document=markdown_documents())
def test_chunkers_on_generated_markdown(name, document):
    check(name, document)


@pytest.mark.parametrize("name", sorted(KNOBS))
@FAST
@given(document=python_documents())
def test_chunkers_on_generated_python(name, document):
    check(name, document)


def test_every_registered_chunker_is_property_tested():
    assert set(CHUNKERS.names()) == set(KNOBS)
