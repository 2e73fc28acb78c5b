"""What a leg's ``unit`` names, as an index: ``chunk`` (the run's chunks), a unit kind (``document``,
``code_example``, ...: kbench/indexes/kinds), a chunker name with its default knobs (``unit:
markdown``) or a chunking section (``unit: {strategy: fixed, chunk_size: 400, chunk_overlap: 0}``).

Units that build the same list share one index (``document`` and ``{strategy: none}`` among them); its name is
the label its units' ids carry: the kind's name, or for a chunking of a leg's own, the first leg on it.
"""
from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from kbench.chunking.config import ChunkingConfig
from kbench.chunking.registry import CHUNKERS
from kbench.errors import format_error
from kbench.hashing import stable_hash
from kbench.indexes.index import CHUNK
from kbench.indexes.kinds.chunking import document_chunking
from kbench.indexes.registry import UNIT_KINDS
from kbench.registry import UnknownNameError

CHUNKING_KIND = "chunking"  # the kind behind a chunker name or section; not a value a leg writes


def unit_names() -> list[str]:
    """What ``unit`` may name besides a chunker or a chunking section."""
    return sorted([CHUNK] + [n for n in UNIT_KINDS.names() if n != CHUNKING_KIND])


def unit_kind(unit: str | dict[str, Any]) -> tuple[str, ChunkingConfig | None]:
    """(kind, the chunking it runs) of a ``unit`` value; ValueError naming what is allowed."""
    if unit == CHUNK:
        return CHUNK, None
    if isinstance(unit, str) and unit in UNIT_KINDS.names() and unit != CHUNKING_KIND:
        return unit, document_chunking() if UNIT_KINDS.get(unit).impl.chunks else None
    if isinstance(unit, str):
        try:
            CHUNKERS.get(unit)
        except UnknownNameError:
            raise ValueError(f"{unit!r} is neither an index ({', '.join(unit_names())}) nor a chunker "
                             f"({', '.join(CHUNKERS.names())})") from None
        return CHUNKING_KIND, ChunkingConfig(strategy=unit)
    try:
        return CHUNKING_KIND, ChunkingConfig(**unit)
    except ValidationError as e:
        raise ValueError("; ".join(format_error(err, "unit", ChunkingConfig) for err in e.errors())) from None


def unit_key(unit: str | dict[str, Any]) -> str:
    """Equal for units that build the same list (``document`` and ``{strategy: none}`` among them)."""
    kind, chunking = unit_kind(unit)
    if chunking is None:
        return kind
    return stable_hash(chunking.model_dump(mode="json"), length=16)


def unit_label(leg: str, unit: str | dict[str, Any]) -> str:
    """The name of the index ``leg`` searches: ``chunk``, a kind's name, ``document``, or for a chunking of its
    own, the leg's name (the first leg on that chunking names it)."""
    kind, chunking = unit_kind(unit)
    if chunking is None:
        return kind
    return "document" if unit_key(unit) == unit_key("document") else leg
