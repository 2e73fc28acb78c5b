"""Per-chunk text metadata, as Archon's extract_metadata stores it with every chunk.

The reference shows the stored fields (``headers`` such as ``"# Authentication"``, ``word_count``,
``has_code``, ``has_links``) but not the function body, so the rules below are kbench's reading:
- headers: the chunk's markdown heading lines (``#`` to ``######`` followed by a space), joined with "; ".
  Source code and OpenAPI specs have no headings (a ``# comment`` is not one), so their chunks get "".
- word_count: ``len(text.split())``.
- has_code: a code fence (```) in the chunk, or the chunk comes from a code document.
- has_links: an http(s) URL or a markdown link ``[text](target)``.
"""
from __future__ import annotations

import re
from typing import Any

HEADING_LINE = re.compile(r"^ {0,3}#{1,6}[ \t]+\S.*$", re.MULTILINE)
LINK = re.compile(r"https?://|\[[^\]\n]*\]\([^)\s]+\)")


def text_metadata(text: str, doc_type: str = "text") -> dict[str, Any]:
    is_code = doc_type == "code"
    # a "# ..." line in code or a YAML/JSON spec is a comment, not a heading
    headers = [] if doc_type in ("code", "openapi") else [m.group(0).strip() for m in HEADING_LINE.finditer(text)]
    return {
        "headers": "; ".join(headers),
        "word_count": len(text.split()),
        "char_count": len(text),
        "has_code": is_code or "```" in text,
        "has_links": bool(LINK.search(text)),
    }
