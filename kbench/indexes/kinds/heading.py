"""``heading``: a title and heading index for documentation sites. One unit per markdown heading, whose text is its
path from the page title down (``Tutorial - User Guide > Path Parameters > Order matters``) and whose range is the
section it heads (up to the next heading); the text before a page's first heading is a unit titled by the page.

Questions often name a page or section by its title ("how do I declare path parameters"): a keyword or vector leg on
``unit: heading``, fused with a leg on the run's chunks, finds the page by its headings and the passage by its
chunks. Headings are ATX headings outside fenced code blocks (kbench.chunking.markdown), read in prose documents
only (a ``# comment`` in code or YAML is no heading); a page without headings is one unit, its title, when it has
one. Inline markup is stripped from titles (backticks, emphasis, link targets).
"""
from __future__ import annotations

import re
from pathlib import Path

from kbench.chunking.markdown import find_headings
from kbench.indexes.index import BuildLog, IndexSections, IndexSpec, Units
from kbench.indexes.registry import UNIT_KINDS, UnitKind
from kbench.records import Chunk, Dataset, Document

PROSE_TYPES = {"markdown", "text", "html", "pdf", "docx"}  # types whose "#" lines are headings
SEPARATOR = " > "
LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
MARKUP = re.compile(r"[`*_]+|<[^>]+>")


def plain(title: str) -> str:
    """A heading's words without inline markup: ``[`Depends`](x.md) **now**`` -> ``Depends now``."""
    return " ".join(MARKUP.sub("", LINK.sub(r"\1", title)).split())


def heading_units(document: Document) -> list[Chunk]:
    """The document's heading units, numbered in text order."""
    text, title = document.text, plain(document.title)
    headings = find_headings(text) if document.doc_type in PROSE_TYPES else []
    units: list[tuple[int, int, str]] = []
    first = headings[0].start if headings else len(text)
    if title and text[:first].strip():
        units.append((0, first, title))
    path: list[tuple[int, str]] = []  # (level, title) of the open ancestors
    for i, heading in enumerate(headings):
        words = plain(heading.title)
        path = [(level, t) for level, t in path if level < heading.level]
        if not words:
            continue
        lineage = [t for _, t in path] + [words]
        if title and title.casefold() != lineage[0].casefold():
            lineage.insert(0, title)  # the page title leads, unless the top heading is the title
        path.append((heading.level, words))
        end = headings[i + 1].start if i + 1 < len(headings) else len(text)
        units.append((heading.start, end, SEPARATOR.join(lineage)))
    return [Chunk(document.doc_id, n, start, end, words, metadata={"heading_path": words})
            for n, (start, end, words) in enumerate(units)]


@UNIT_KINDS.register("heading")
class HeadingUnits(UnitKind):
    """Page titles and heading paths, each over the section it heads (documentation sites)."""

    def build(self, spec: IndexSpec, dataset: Dataset, sections: IndexSections, log: BuildLog,
              cache_root: Path) -> Units:
        with log.timer.stage("units"):
            per_document = [heading_units(d) for d in dataset.documents]
        units = [u for found in per_document for u in found]
        log.counts.update({f"units_{spec.name}_units": len(units),
                           f"units_{spec.name}_documents_without_units": sum(not found for found in per_document)})
        return Units(units)
