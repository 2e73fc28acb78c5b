"""Filters: one boolean mask over the run's chunks, handed identically to every leg.

A chunk's *row metadata* is its document's metadata with the chunk's own metadata on top (production
stores one JSONB per chunk row). Filters, all ANDed:
- ``source_ids``: the document's ``source_id`` is listed (Archon's source_filter);
- ``metadata``: ``row_metadata @> filter`` with PostgreSQL's jsonb containment (see ``jsonb_contains``),
  as the Archon replication guide's ``WHERE d.metadata @> filter``;
- ``doc_types``: the document's ``doc_type`` is listed (the GWI spec's type=code, type IN [pr, commit]);
- The Chroma RAG's ``knowledge_ids`` (``doc_ids``), ``category`` (row metadata 'category' equals it) and
  ``tags`` (row metadata 'tags', a list or a comma-separated string, holds any / all of them).
``exclude_query_document`` depends on the query, so it is not part of the mask: ``drop_query_document``
removes those results after the first stage, as the GWI spec's 'similar' pipeline does.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from kbench.retrieval.config import FilterConfig
from kbench.records import Chunk, Document, Hit, Query


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _scalar_equal(a: Any, b: Any) -> bool:
    """jsonb scalar equality: numbers compare by value (1 = 1.0), but true is not 1 and "1" is not 1."""
    if _is_number(a) and _is_number(b):
        return a == b
    return type(a) is type(b) and a == b


def jsonb_contains(container: Any, contained: Any, top_level: bool = True) -> bool:
    """PostgreSQL's ``container @> contained`` for JSON values (lists, dicts, scalars).

    - scalars: equal;
    - objects: every key of ``contained`` is in ``container`` and its value is contained there; a value
      of a different kind (object vs array vs scalar) never matches;
    - arrays: every element of ``contained`` is contained by some element of ``container`` (order and
      duplicates do not matter; a nested array or object must match a nested one);
    - the one exception: at the top level an array contains a bare scalar it holds
      (``'["a", "b"]' @> '"a"'``); not inside objects (``{"t": ["a"]} @> {"t": "a"}`` is false).
    """
    if isinstance(contained, dict):
        if not isinstance(container, dict):
            return False
        return all(key in container and _kind(container[key]) == _kind(value)
                   and jsonb_contains(container[key], value, top_level=False)
                   for key, value in contained.items())
    if isinstance(contained, list):
        if not isinstance(container, list):
            return False
        return all(_array_holds(container, element) for element in contained)
    if isinstance(container, list):
        return top_level and any(not isinstance(e, (list, dict)) and _scalar_equal(e, contained) for e in container)
    if isinstance(container, dict):
        return False
    return _scalar_equal(container, contained)


def _kind(value: Any) -> str:
    return "object" if isinstance(value, dict) else "array" if isinstance(value, list) else "scalar"


def _array_holds(container: list, element: Any) -> bool:
    if isinstance(element, (list, dict)):
        return any(_kind(e) == _kind(element) and jsonb_contains(e, element, top_level=False) for e in container)
    return any(not isinstance(e, (list, dict)) and _scalar_equal(e, element) for e in container)


def row_metadata(chunk: Chunk, document: Document | None) -> dict[str, Any]:
    return {**(document.metadata if document else {}), **chunk.metadata}


def _tags(value: Any) -> set[str]:
    if isinstance(value, str):
        return {t.strip() for t in value.split(",") if t.strip()}
    if isinstance(value, (list, tuple, set)):
        return {str(t) for t in value}
    return set()


def is_active(config: FilterConfig) -> bool:
    """Does any mask filter apply? (``exclude_query_document`` is per query, not a mask.)"""
    return any(v is not None for v in (config.source_ids, config.metadata, config.doc_types, config.doc_ids,
                                       config.category, config.tags))


def chunk_passes(chunk: Chunk, document: Document | None, config: FilterConfig) -> bool:
    if config.doc_ids is not None and chunk.doc_id not in config.doc_ids:
        return False
    if config.source_ids is not None and (document is None or document.source_id not in config.source_ids):
        return False
    if config.doc_types is not None and (document is None or document.doc_type not in config.doc_types):
        return False
    meta = row_metadata(chunk, document)
    if config.metadata is not None and not jsonb_contains(meta, config.metadata):
        return False
    if config.category is not None and meta.get("category") != config.category:
        return False
    if config.tags is not None:
        have, want = _tags(meta.get("tags")), set(config.tags)
        if not (want <= have if config.tags_match == "all" else want & have):
            return False
    return True


def filter_mask(chunks: list[Chunk], documents: dict[str, Document], config: FilterConfig) -> np.ndarray | None:
    """``mask[i]`` True when chunk i may be returned; None when no filter is set (every chunk may)."""
    if not is_active(config):
        return None
    return np.fromiter((chunk_passes(c, documents.get(c.doc_id), config) for c in chunks), dtype=bool,
                       count=len(chunks))


def describe(config: FilterConfig) -> str:
    set_fields = {k: v for k, v in config.model_dump().items() if v not in (None, False) and k != "tags_match"}
    return ", ".join(f"{k}={v!r}" for k, v in set_fields.items())


def drop_query_document(hits: list[Hit], query: Query, chunks: list[Chunk]) -> list[Hit]:
    """The GWI spec's exclude_same_file: drop hits from the document the query came from."""
    own = query.metadata.get("doc_id")
    if own is None:
        return hits
    return [h for h in hits if chunks[h.chunk_index].doc_id != own]
