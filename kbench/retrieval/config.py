"""The retrieval and rerank sections: legs and their knobs, fusion, filters, grouping, presets, reranker."""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

from pydantic import Field, PrivateAttr, ValidationError, model_validator

from kbench.errors import format_error
from kbench.indexes import CHUNK, IndexSpec, unit_key, unit_kind, unit_label
from kbench.registry import StrategySection, StrictModel, UnknownNameError, in_unit, run_key_knobs
from kbench.retrieval.presets import expand_preset
from kbench.retrieval.registry import FUSIONS, LEGS, RERANKERS
from kbench.retrieval.text.stopwords import list_key
from kbench.retrieval.units import LegUnit, split_leg_params


class FusionConfig(StrategySection):
    registry = FUSIONS
    renamed_keys = {"method": "strategy"}
    strategy: str = Field("none", description="how legs' rankings are fused (a registered fusion)")


class RerankConfig(StrategySection):
    registry = RERANKERS
    renamed_keys = {"method": "strategy"}
    enabled: bool = Field(False, description="rerank the first stage's candidates")
    strategy: str = Field("cross_encoder", description="how candidates are rescored (a registered reranker)")

    def _should_validate(self) -> bool:
        # rerank off and no knobs given: nothing to check
        return self.enabled or bool(self.model_extra)


class FilterConfig(StrictModel):
    """Which chunks every leg may return (one mask, kbench/retrieval/filters.py); all given filters AND."""

    source_ids: list[str] | None = Field(None, description="keep chunks whose document's source_id is listed")
    metadata: dict[str, Any] | None = Field(
        None, description="metadata @> filter (PostgreSQL jsonb containment) on document + chunk metadata")
    doc_types: list[str] | None = Field(None, description="keep documents of these types (code, markdown, pr, ...)")
    doc_ids: list[str] | None = Field(None, description="keep these documents (the Chroma RAG's knowledge_ids)")
    category: str | None = Field(None, description="metadata 'category' equals this (the Chroma RAG)")
    tags: list[str] | None = Field(None, description="metadata 'tags' holds any (or all) of these (the Chroma RAG)")
    tags_match: Literal["any", "all"] = Field("any", description="tags: a chunk needs any, or all, of them")
    exclude_query_document: bool = Field(
        False, description="drop results from the query's own document (query metadata 'doc_id'), after the "
                           "first stage as the GWI spec's 'similar' search does")


class GroupingConfig(StrictModel):
    enabled: bool = Field(False, description="one result per page (document): Archon's _group_by_page")
    boost_per_chunk: float = Field(0.1, description="Archon: score *= 1 + boost * count when count > 1")
    score: Literal["score", "vector_similarity"] = Field(
        "score", description="what is summed per page: each hit's final score, or its vector leg's cosine "
                             "(0 when the vector leg did not find it; Archon sums similarity_score)")


class ContextConfig(StrictModel):  # the ``context`` section, used by retrieval/context.py
    enabled: bool = Field(False, description="assemble each ranking into a context and score it (context_* metrics)")
    max_context_tokens: int = Field(4000, ge=1, description="token budget of the assembled context (the GWI spec)")
    drop_overlapping: bool = Field(True, description="drop a chunk overlapping one kept before it")
    include_metadata: bool = Field(False, description="a [source: ...] header line before each chunk")
    tokenizer: str = Field("all-MiniLM-L6-v2", description="catalogue model whose tokenizer counts tokens")


class RetrievalConfig(StrictModel):
    late_knobs = {"candidates_unit": "searched"}  # added later: at its default, run keys are the old ones
    legs: list[str] = Field(default_factory=lambda: ["vector"], min_length=1,
                            description="the first-stage rankers; two or more need a fusion")
    leg_params: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="knobs per leg name, plus its unit (kbench/retrieval/units.py)")
    fusion: FusionConfig = Field(default_factory=FusionConfig)
    top_k: int = Field(100, ge=1, description="results kept per query after fusion (and rerank)",
                       json_schema_extra=in_unit("results"))
    candidates_per_leg: int | None = Field(None, ge=1, description="results each leg passes to fusion; default: "
                                           "top_k", json_schema_extra=in_unit("results"))
    candidates_unit: Literal["searched", "fused"] = Field(
        "searched", description="what candidates_per_leg counts when legs on different units are fused at document "
                                "level: searched = the units each leg searches (a chunk leg brings N chunks, maybe "
                                "fewer documents); fused = what each leg brings to the fusion (N distinct documents, "
                                "as public baselines fuse each leg's top N pages). Same-unit runs: no difference")
    filters: FilterConfig = Field(default_factory=FilterConfig)
    grouping: GroupingConfig = Field(default_factory=GroupingConfig)
    preset: str | None = Field(None, description="a search type of the GWI spec (semantic, code, similar, "
                                                 "historical): fills the settings this section leaves unset")
    fusion_level: Literal["document", "unit"] = Field(
        "document", description="legs on different units (kbench/retrieval/units.py): fuse their rankings lifted to "
                                "documents, or fuse the units as they are (a page chunk and a code example compete)")
    latency: Literal["per_query", "batch"] = Field(
        "per_query", description="per_query: each query runs alone through every stage (real latency); "
                                 "batch: stages run batched, latency is the batch time / queries")
    _units: dict[str, LegUnit] = PrivateAttr(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _expand_preset(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("preset"):
            return expand_preset(data)
        return data

    @model_validator(mode="after")
    def _check_legs(self):
        for name in self.legs:
            try:
                LEGS.get(name)
            except UnknownNameError as e:
                raise ValueError(str(e).replace(LEGS.field, "retrieval.legs")) from None
        resolved, units = {}, {}
        for name in self.legs:
            values, units[name] = split_leg_params(name, self.leg_params.get(name, {}))
            fixed = LEGS.get(name).impl.fixed_unit
            if fixed is not None:  # e.g. code_examples: its units come from another stage, never a knob
                if units[name].unit not in ("chunk", fixed):
                    raise ValueError(f"retrieval.leg_params.{name}.unit: the {name} leg always searches {fixed} "
                                     f"units (got {units[name].unit!r}); leave unit out")
                units[name] = units[name].model_copy(update={"unit": fixed})
            try:
                resolved[name] = LEGS.params(name, values).model_dump() | units[name].resolved()
            except ValidationError as e:
                raise ValueError(
                    "; ".join(format_error(err, f"retrieval.leg_params.{name}", LEGS.get(name).params)
                              for err in e.errors())
                ) from None
        unused = set(self.leg_params) - set(self.legs)
        if unused:
            raise ValueError(f"retrieval.leg_params: {sorted(unused)} are not in retrieval.legs {self.legs}")
        self.__dict__["leg_params"] = resolved
        self._units = units
        if len(self.legs) > 1 and self.fusion.strategy == "none":
            raise ValueError(
                f"retrieval.fusion.strategy: 'none' cannot combine {len(self.legs)} legs {self.legs}; "
                f"choose a fusion ({', '.join(n for n in FUSIONS.names() if n != 'none')}) or keep one leg"
            )
        self.fusion.params.check_legs(self.legs)  # e.g. weighted fuses exactly two
        if self.fusion.params.wants_unreturned_scores():  # weighted, missing_score: union
            cannot = [name for name in self.legs if not LEGS.get(name).impl.scores_any_unit]
            if cannot or self.multi_unit:
                why = (f"{', '.join(cannot)} cannot score units it did not return" if cannot
                       else "the legs search different units")
                raise ValueError(f"retrieval.fusion.missing_score: union has each leg score the other leg's "
                                 f"candidates, but {why}; use min or zero, or legs on the same units among "
                                 f"{', '.join(n for n in LEGS.names() if LEGS.get(n).impl.scores_any_unit)}")
        return self

    def run_key_view(self, data: dict[str, Any]) -> dict[str, Any]:
        """This section's resolved ``data`` as the run key hashes it: knobs added after runs were logged left out
        at their old-behaviour values, renamed knobs under their old names (``StrictModel.late_knobs``,
        ``hashed_as``), and a stop word file by its words, not its path."""
        data = run_key_knobs(type(self), data)
        legs = {}
        for name, knobs in data.get("leg_params", {}).items():
            knobs = run_key_knobs(LEGS.get(name).params, knobs)
            if isinstance(knobs.get("stopwords"), str):
                knobs["stopwords"] = list_key(knobs["stopwords"])
            legs[name] = knobs
        data["leg_params"] = legs
        data["fusion"] = run_key_knobs(FUSIONS.get(self.fusion.strategy).params, data["fusion"])
        return data

    def leg_knobs(self, name: str) -> dict[str, Any]:
        """The leg's own params (its unit keys taken out)."""
        return split_leg_params(name, self.leg_params.get(name, {}))[0]

    def leg_unit(self, name: str) -> LegUnit:
        return self._units.get(name) or split_leg_params(name, self.leg_params.get(name, {}))[1]

    @property
    def multi_unit(self) -> bool:
        """Whether the legs search different units (then fusion happens at document level)."""
        return len({unit_key(self.leg_unit(name).unit) for name in self.legs}) > 1

    def leg_index(self, name: str) -> str:
        """The name of the index leg ``name`` searches (``chunk``: the run's chunks)."""
        return self.index_specs()[1][name]

    def index_specs(self) -> tuple[list[IndexSpec], dict[str, str]]:
        """(every index the legs search, the run's chunks first; leg -> index name). Legs on units that build the
        same list share one index, named by the first of them; an index is embedded when a leg on it reads
        vectors."""
        specs: dict[str, IndexSpec] = {CHUNK: IndexSpec(CHUNK, CHUNK)}
        names: dict[str, str] = {}  # unit key -> index name
        of_leg: dict[str, str] = {}
        for leg in self.legs:
            unit = self.leg_unit(leg).unit
            key = unit_key(unit)
            if key not in names:
                names[key] = unit_label(leg, unit)
                kind, chunking = unit_kind(unit)
                specs.setdefault(names[key], IndexSpec(names[key], kind, chunking))
            name = of_leg[leg] = names[key]
            if LEGS.get(leg).impl.needs_query_vectors:
                specs[name] = replace(specs[name], embed=True)
        return list(specs.values()), of_leg
