"""Real text for chunking tests: the Chroma corpora, the demo docs, installed source modules."""
from __future__ import annotations

from pathlib import Path

from kbench.paths import REPO_ROOT, shared_datasets_dir
from kbench.records import Chunk, Document

CHROMA_CORPORA = shared_datasets_dir() / "chroma_chunking" / "corpora"
DEMO_DOCS = REPO_ROOT / "datasets" / "demo" / "docs"


def chroma_document(name: str) -> Document:
    path = CHROMA_CORPORA / f"{name}.md"
    return Document(name, path.read_text(encoding="utf-8"), title=name, url=str(path), doc_type="markdown")


def demo_document(relative: str) -> Document:
    from kbench.sources.folder import to_document
    from kbench.sources.loaders import load_file

    return to_document(relative, load_file(DEMO_DOCS / relative))


def module_document(module) -> Document:
    path = Path(module.__file__)
    return Document(f"{module.__name__}.py", path.read_text(encoding="utf-8"), url=path.name, doc_type="code")


def uncovered(document: Document, chunks: list[Chunk]) -> list[int]:
    """Offsets of non-whitespace characters that no chunk's range covers."""
    covered = bytearray(len(document.text))
    for c in chunks:
        covered[c.start:c.end] = b"\x01" * (c.end - c.start)
    return [i for i, ch in enumerate(document.text) if not covered[i] and not ch.isspace()]
