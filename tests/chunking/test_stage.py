"""chunk_corpus: every chunk carries Archon's text metadata plus the chunker's name and knobs."""
from __future__ import annotations

from kbench.chunking import chunk_corpus
from kbench.chunking.metadata import text_metadata
from kbench.config import ChunkingConfig
from tests.chunking.corpora import demo_document


def test_metadata_of_every_chunk():
    documents = [demo_document("api/authentication.md"), demo_document("sdk/client.py")]
    chunks = chunk_corpus(documents, ChunkingConfig(strategy="smart"))
    for c in chunks:
        assert c.metadata["chunker"] == "smart"
        assert c.metadata["chunker_params"] == {"chunk_size": 600, "break_threshold": 0.3, "merge_below": 200}
        assert c.metadata["word_count"] == len(c.text.split())
    first = chunks[0]
    assert first.metadata["headers"].startswith("# Authentication")
    assert any(c.metadata["has_code"] for c in chunks if c.doc_id.endswith(".md"))
    assert all(c.metadata["has_code"] and c.metadata["headers"] == "" for c in chunks if c.doc_id.endswith(".py"))
    assert any(c.metadata["has_links"] for c in chunks)


def test_text_metadata_rules():
    meta = text_metadata("## Setup\nSee [docs](https://x.io).\n```\ncode\n```\n# Two")
    assert meta == {"headers": "## Setup; # Two", "word_count": 9, "char_count": 53, "has_code": True,
                    "has_links": True}
    assert text_metadata("#hashtag and plain text")["headers"] == ""
