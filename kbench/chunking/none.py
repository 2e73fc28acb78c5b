"""``none``: one chunk per document (BEIR-style whole-document retrieval)."""
from __future__ import annotations

from kbench.chunking.registry import CHUNKERS
from kbench.records import Chunk, Document
from kbench.registry import StrictModel


class NoParams(StrictModel):
    pass


@CHUNKERS.register("none", NoParams)
def whole_document(document: Document, params: NoParams) -> list[Chunk]:
    """One chunk per document; BEIR titles are prepended as the embedded text (as BEIR does)."""
    if not document.text.strip() and not document.title.strip():
        return []
    text = f"{document.title} {document.text}".strip() if document.title else document.text
    return [Chunk(document.doc_id, 0, 0, len(document.text), text)]
