"""markdown: sections at headings up to max_depth, kept whole when they fit, heading path in metadata."""
from __future__ import annotations

from kbench.chunking.markdown import MarkdownParams, find_headings, markdown_chunks
from kbench.records import Document
from tests.chunking.corpora import demo_document, uncovered


def test_demo_page_sections_follow_its_headings():
    document = demo_document("api/authentication.md")
    chunks = markdown_chunks(document, MarkdownParams())
    titles = [c.metadata["title"] for c in chunks]
    assert titles == ["Authentication", "API keys", "Scopes", "Creating keys", "Rotating keys", "Revoking keys",
                      "Failed authentication", "Dashboard single sign-on"]
    assert chunks[1].metadata["parent_section"] == "Authentication"
    assert chunks[1].metadata["heading_path"] == ["Authentication", "API keys"]
    assert chunks[1].metadata["header_level"] == 2
    assert chunks[1].text.startswith("## API keys\n")
    assert all(document.text[c.start:c.end] == c.text for c in chunks)
    assert not uncovered(document, chunks)


def test_hash_lines_in_code_fences_are_not_headings():
    text = "# Guide\n\nIntro.\n\n```python\n# not a heading\nx = 1\n```\n\n## Next\n\nBody.\n"
    assert [h.title for h in find_headings(text)] == ["Guide", "Next"]
    chunks = markdown_chunks(Document("d", text), MarkdownParams())
    assert [c.metadata["title"] for c in chunks] == ["Guide", "Next"]
    assert "# not a heading" in chunks[0].text


def test_deeper_headings_stay_inside_and_heading_only_sections_join_the_next():
    text = "# Top\n## Mid\n\ntext of mid\n\n#### Deep\n\ndeep text\n\n## Other\n\nmore\n"
    chunks = markdown_chunks(Document("d", text, title="Doc"), MarkdownParams(max_depth=3))
    assert [c.metadata["title"] for c in chunks] == ["Mid", "Other"]
    assert chunks[0].text.startswith("# Top\n## Mid") and "#### Deep" in chunks[0].text
    assert chunks[1].metadata["parent_section"] == "Top"
    separate = markdown_chunks(Document("d", text), MarkdownParams(merge_heading_only=False))
    assert [c.metadata["title"] for c in separate] == ["Top", "Mid", "Other"]


def test_long_sections_are_split_and_keep_their_heading_metadata():
    document = demo_document("guides/workflows.md")
    chunks = markdown_chunks(document, MarkdownParams(chunk_size=300, chunk_overlap=50))
    parts = [c for c in chunks if c.metadata["section_parts"] > 1]
    assert parts and all(len(c.text) <= 300 for c in chunks if " " in c.text)
    first = parts[0]
    same = [c for c in chunks if c.metadata["heading_path"] == first.metadata["heading_path"]]
    assert [c.metadata["section_part"] for c in same] == list(range(first.metadata["section_parts"]))
    assert all(document.text[c.start:c.end] == c.text for c in chunks)


def test_text_before_the_first_heading_is_a_level_zero_section():
    chunks = markdown_chunks(Document("d", "preface line\n\n# One\n\nbody\n", title="T"), MarkdownParams())
    assert (chunks[0].metadata["header_level"], chunks[0].metadata["title"]) == (0, "T")
    assert chunks[0].text == "preface line"
