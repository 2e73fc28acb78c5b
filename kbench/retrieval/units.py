"""Fusion across units: a leg's ``unit`` keys (``retrieval.leg_params.<leg>.unit``), lifting a leg to documents,
and the catalog of every unit list a search ranks.

A leg's unit names the index it searches (kbench/indexes: ``chunk``, the run's chunking; ``document``;
``code_example``; any unit kind of kbench/indexes/kinds; a chunker name or a chunking section of its own). The pipeline builds each
distinct index once (kbench/indexes/build.py) and the search hands each leg its own.

When every leg searches the same units, nothing changes: the fusion sees unit rows as it always did.
When legs search different units, the only unit they all share is the document, so each leg's ranking is
**lifted to documents** and fused there:

- per document, the leg's score is an aggregation of its units' scores in the leg's list: ``max`` (the
  best unit, default), ``sum``, or ``top-n-mean`` (mean of its ``aggregation_n`` best units, fewer when the
  list holds fewer); documents are ordered by that score, ties by where their best unit ranked;
- the fusion (any method) then fuses document rankings; leg ranks and scores in the result are per document;
- each fused document keeps, per leg that found it, that leg's best unit (``Hit.passages``; offsets reach
  the ``Run`` as ``RankedHit.passages``), and is represented by its **finest** best unit (fewest
  characters; ties: ``retrieval.legs`` order): the passage span metrics read and a reranker scores.

With ``retrieval.fusion_level: unit`` nothing is lifted: each leg's units are catalog rows and the fusion
fuses those rows, so a page chunk and a code example (say) compete as they are and the result interleaves
them; a unit found by two legs is one only when both legs search the same list.

Rows: unit lists are laid end to end in one catalog (``UnitCatalog``), first use first, so every unit has
one row; fused hits point at catalog rows and ``Run.from_hits`` reads ids and offsets from the catalog.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator

from kbench.errors import format_error
from kbench.indexes import unit_kind
from kbench.records import Chunk, Hit
from kbench.registry import StrictModel, in_unit
from kbench.retrieval.contracts import LegResult

UNIT_KEYS = ("unit", "aggregation", "aggregation_n")
Aggregation = Literal["max", "sum", "top-n-mean"]


class LegUnit(StrictModel):
    """The unit keys of one leg's ``leg_params`` (taken out before the leg's own params validate)."""

    unit: str | dict[str, Any] = Field(
        "chunk", description="the index the leg searches: chunk (the run's chunking) | a unit kind (document, "
                             "code_example, ...: kbench/indexes/kinds) | a chunker name | a chunking section")
    aggregation: Aggregation = Field(
        "max", description="multi-unit runs: a document's score from its units' scores in this leg: max | sum "
                           "| top-n-mean")
    aggregation_n: int = Field(3, ge=1, description="top-n-mean: how many of a document's best units",
                               json_schema_extra=in_unit("units"))

    @field_validator("unit")
    @classmethod
    def _check_unit(cls, value):
        _, chunking = unit_kind(value)  # raises ValueError naming what is allowed
        return value if isinstance(value, str) else chunking.model_dump()

    def resolved(self) -> dict[str, Any]:
        """The keys to keep in the resolved config: only those not at their default, so a config without
        units keeps its resolved form (and its run key) unchanged."""
        defaults = LegUnit()
        return {k: getattr(self, k) for k in UNIT_KEYS if getattr(self, k) != getattr(defaults, k)}


def split_leg_params(name: str, values: dict[str, Any]) -> tuple[dict[str, Any], LegUnit]:
    """(the leg's own knobs, its unit) from ``retrieval.leg_params.<name>``."""
    knobs = {k: v for k, v in values.items() if k not in UNIT_KEYS}
    try:
        unit = LegUnit(**{k: values[k] for k in UNIT_KEYS if k in values})
    except ValidationError as e:
        raise ValueError("; ".join(format_error(err, f"retrieval.leg_params.{name}", LegUnit)
                                   for err in e.errors())) from None
    return knobs, unit


@dataclass
class UnitCatalog:
    """Every unit list of a search laid end to end: ``rows[i]`` is one unit, ``offset[leg]`` where the
    leg's list starts, ``doc_of[i]`` the document index (first-appearance order) of row i."""

    rows: list[Chunk]
    offset: dict[str, int]
    doc_of: list[int]
    doc_ids: list[str]

    @classmethod
    def build(cls, unit_lists: dict[str, list[Chunk]]) -> "UnitCatalog":
        rows: list[Chunk] = []
        offset: dict[str, int] = {}
        placed: dict[int, int] = {}  # id(list) -> offset: legs sharing a list share rows
        for leg, units in unit_lists.items():
            if id(units) not in placed:
                placed[id(units)] = len(rows)
                rows.extend(units)
            offset[leg] = placed[id(units)]
        doc_index: dict[str, int] = {}
        doc_of = [doc_index.setdefault(c.doc_id, len(doc_index)) for c in rows]
        return cls(rows, offset, doc_of, list(doc_index))


def lift_to_documents(ranked: LegResult, doc_of: list[int], offset: int, aggregation: str = "max",
                      n: int = 3) -> tuple[LegResult, dict[int, int]]:
    """One leg's unit ranking -> (document ranking [(doc index, score)] best first, doc -> best unit row).

    ``doc_of`` maps catalog rows to documents, ``offset`` is where the leg's unit rows start in the catalog.
    The leg's list is best first, so a document's first unit is its best; ties in the aggregated score
    keep the order of the documents' best units."""
    scores: dict[int, list[float]] = {}
    best: dict[int, int] = {}
    for unit, score in ranked:
        row = offset + unit
        doc = doc_of[row]
        if doc not in best:
            best[doc] = row
        scores.setdefault(doc, []).append(float(score))
    aggregated = {doc: aggregate(values, aggregation, n) for doc, values in scores.items()}
    order = sorted(best, key=lambda d: -aggregated[d])  # stable: ties keep best-unit order
    return [(d, aggregated[d]) for d in order], best


def aggregate(scores: list[float], aggregation: str, n: int) -> float:
    """A document's score from its units' scores (best first)."""
    if aggregation == "max":
        return max(scores)
    if aggregation == "sum":
        return float(sum(scores))
    if aggregation == "top-n-mean":
        top = sorted(scores, reverse=True)[:n]
        return float(sum(top) / len(top))
    raise ValueError(f"aggregation: unknown {aggregation!r}; allowed: max, sum, top-n-mean")


def attach_passages(fused: list[Hit], best_units: dict[str, dict[int, int]], catalog: UnitCatalog,
                    legs: list[str]) -> list[Hit]:
    """Document hits (``chunk_index`` = document index) -> hits on catalog rows: each document's finest best
    unit represents it, ``passages`` holds every finding leg's best unit."""
    out = []
    for hit in fused:
        passages = {leg: best_units[leg][hit.chunk_index] for leg in legs if hit.chunk_index in best_units[leg]}
        primary = min(passages.values(), key=lambda r: catalog.rows[r].end - catalog.rows[r].start)  # first min
        out.append(Hit(primary, hit.score, leg_scores=hit.leg_scores, leg_ranks=hit.leg_ranks,
                       match_type=hit.match_type, passages=passages))
    return out
