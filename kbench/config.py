"""Experiment: one config file, composed of the section models each stage owns, and the one YAML loader.

A config file describes one experiment. Each stage package owns its section (``chunking/config.py``,
``retrieval/config.py``, ...); strategy knobs (a chunker's sizes, a fusion's weights, a reranker's model)
sit beside the strategy name and are validated against the params model the strategy registered, so
``chunking: {strategy: smart, chunk_size: 600}`` is checked by the smart chunker's own model and the
resolved config lists every knob with its default filled in.

Every error names the field path, the bad value and what is allowed, and nothing is run or written
before the whole config validates.
"""
from __future__ import annotations

import copy
import unicodedata
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from kbench.chunking.config import ChunkingConfig
from kbench.datasets.config import DatasetConfig
from kbench.datasets.mlflow_questions import questions_digest
from kbench.datasets.reading import DatasetError
from kbench.datasets.registry import resolve_dataset_path
from kbench.dotted import get_dotted, set_dotted
from kbench.embedding.choice import resolved as resolved_backend
from kbench.embedding.config import FAST, EmbeddingConfig
from kbench.embedding.tuning import sample_of_dataset
from kbench.enrichment.config import CODE_EXAMPLE_UNIT, CodeExamplesConfig, EnrichmentConfig
from kbench.errors import ConfigError, deprecated, format_error, note, shorten
from kbench.evaluation.config import (DEFAULT_COST, DEFAULT_GUARDS, STAGE_FORMS, EvaluationConfig, OverlapRule,
                                      RecommendConfig, cost_problem, guard_problem)
from kbench.hashing import folder_content_hash, stable_hash
from kbench.llm import LLMConfig
from kbench.registry import StrictModel
from kbench.retrieval.config import (ContextConfig, FilterConfig, FusionConfig, GroupingConfig, RerankConfig,
                                     RetrievalConfig)
from kbench.retrieval.query.config import QueryConfig
from kbench.retrieval.registry import LEGS
from kbench.store.config import StoreConfig
from kbench.paths import tracking_uri, workspace_dir
from kbench.tracking.config import TrackingConfig

__all__ = [  # the sections are re-exported so a notebook can build any of them from one import
    "ChunkingConfig", "CodeExamplesConfig", "ConfigError", "DatasetConfig", "EmbeddingConfig", "EnrichmentConfig",
    "EvaluationConfig",
    "Experiment", "FilterConfig", "FusionConfig", "GroupingConfig", "OverlapRule", "RecommendConfig", "RerankConfig",
    "RetrievalConfig", "StoreConfig", "TrackingConfig", "apply_set_items", "load_experiment", "parse_override",
    "read_yaml_mapping", "set_dotted", "validate_experiment",
]


MAX_NAME_CHARS = 500  # MLflow's limit for experiment names; the run folder shortens long names itself


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a run (its folder, its MLflow run), or None.

    Path characters are allowed (a sweep labels its configs ``base[dataset.path=/data/x]``): the run
    folder turns a name into a safe folder name. What no folder or MLflow run can carry is refused.
    """
    if not name.strip():
        return "is empty"
    if any(unicodedata.category(ch).startswith("C") for ch in name):
        return f"holds a control character (got {shorten(name)})"
    if len(name) > MAX_NAME_CHARS:
        return f"is {len(name)} characters long (got {shorten(name)})"
    return None


class Experiment(StrictModel):
    name: str = Field("experiment", description="the run's name: its folder (made safe) and its MLflow run name")
    description: str = Field("", description="what the run tests, in a sentence: shown on its MLflow page")
    workspace: str = Field("experiments", description="folder for mlflow.db, mlruns/, cache/, stores/")
    dataset: DatasetConfig
    chunking: ChunkingConfig = Field(default_factory=ChunkingConfig)
    enrichment: EnrichmentConfig = Field(default_factory=EnrichmentConfig)
    llm: LLMConfig = Field(default_factory=LLMConfig)
    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    query: QueryConfig = Field(default_factory=QueryConfig)
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    rerank: RerankConfig = Field(default_factory=RerankConfig)
    context: ContextConfig = Field(default_factory=ContextConfig)
    evaluation: EvaluationConfig = Field(default_factory=EvaluationConfig)
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)
    recommend: RecommendConfig = Field(default_factory=RecommendConfig)
    sweep: dict[str, list[Any]] | None = Field(None, description="dotted path -> values; expands to a grid")
    variants: list[dict[str, Any]] | None = Field(None, description="named override sets, beside the grid")

    @field_validator("name")
    @classmethod
    def _usable_name(cls, name: str) -> str:
        if problem := name_problem(name):
            raise ValueError(f"{problem}; give a short name of letters, digits and -_. (at most "
                             f"{MAX_NAME_CHARS} characters, no control characters)")
        return name

    @model_validator(mode="after")
    def _usable_tracking_names(self):
        # MLflow refuses these only after the run folder is written; refuse them before any work
        for field, value in (("tracking.run_name", self.tracking.run_name),
                             ("tracking.experiment", self.tracking.experiment)):
            if value is not None and (problem := name_problem(value)):
                raise ValueError(f"{field}: {problem}; give a short name (at most {MAX_NAME_CHARS} characters, "
                                 "no control characters)" + ("; or leave it out to use name" if
                                                             field == "tracking.run_name" else ""))
        return self

    @model_validator(mode="after")
    def _questions_from_the_runs_store(self):
        # questions kept in MLflow are read from the store the run logs to, unless the dataset section names one
        if self.dataset.questions_from and not self.dataset.questions_tracking_uri:
            self.dataset.questions_tracking_uri = tracking_uri(self.tracking.tracking_uri, workspace_dir(self.workspace))
        return self

    @model_validator(mode="after")
    def _code_examples_have_a_leg(self):
        # the index costs one LLM request per block: built only for a leg that searches it, and always for one
        on = self.enrichment.code_examples.enabled
        searching = [n for n in self.retrieval.legs if self.retrieval.leg_unit(n).unit == CODE_EXAMPLE_UNIT]
        if searching and not on:
            raise ValueError(f"retrieval.legs: {', '.join(searching)} searches the code-example index, which is off; "
                             "set enrichment.code_examples.enabled: true (with base_url and model, or summary: none)")
        if on and not searching:
            raise ValueError("enrichment.code_examples.enabled: no leg searches the code-example index; add "
                             "code_examples to retrieval.legs (with a fusion to keep the page legs) or turn it off")
        return self

    @model_validator(mode="after")
    def _fast_names_the_backend_it_runs(self):
        # embedding.backend: fast is chosen from this machine's measurements (tuned first, on the run's own corpus,
        # if need be): the saved config and the run key name the backend that runs (kbench/embedding/choice.py)
        if self.embedding.backend == FAST:
            self.embedding = resolved_backend(self.embedding, sample=lambda: sample_of_dataset(self.dataset))
        return self

    @model_validator(mode="after")
    def _recommend_names_what_runs_measure(self):
        # a guard, cost or stage no run measures turns its rule off without a word: refused with what there is
        recommend, problems = self.recommend, []
        if recommend.guards != DEFAULT_GUARDS and (problem := guard_problem(
                recommend.guards, self.evaluation.metric_columns(), self.evaluation.metric_forms())):
            problems.append(f"recommend.guards: {problem}")
        if recommend.cost != DEFAULT_COST and (problem := cost_problem(recommend.cost, bool(self.llm_stages()))):
            problems.append(f"recommend.cost: {problem}")
        stage = recommend.latency_stage
        if stage.startswith("leg_") and stage.removeprefix("leg_") not in LEGS.names():
            problems.append(f"recommend.latency_stage: {stage!r} names no leg (legs: {', '.join(LEGS.names())}); "
                            f"allowed: {STAGE_FORMS}")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def latency_stages(self) -> list[str]:
        """The stages a search of this config times per question (``latency_ms_<stage>``, retrieval/stage.py):
        what ``recommend.latency_stage`` may name."""
        vectors = any(LEGS.get(name).impl.needs_query_vectors for name in self.retrieval.legs)
        return (["total"] + (["embed_query"] if vectors else []) + [f"leg_{name}" for name in self.retrieval.legs]
                + ["fusion"] + (["rerank"] if self.rerank.enabled else [])
                + (["grouping"] if self.retrieval.grouping.enabled else []))

    def resolved(self) -> dict[str, Any]:
        """The config with every default filled in, as plain data (what is saved with each run)."""
        return self.model_dump(mode="json")

    def portable(self) -> dict[str, Any]:
        """``resolved()`` with every path made absolute (as this process sees it) and the workspace the one used
        (``KBENCH_WORKSPACE`` applied): a config file kbench writes (a sweep's winner.yaml) runs the same from any
        folder. A model named by the catalogue stays a name; a model folder becomes its absolute path."""
        data = self.resolved()
        data["workspace"] = str(workspace_dir(self.workspace))
        for section, key in (("dataset", "path"), ("store", "path"), ("store", "pg_datadir")):
            value = (data.get(section) or {}).get(key)
            if isinstance(value, str) and value:
                data[section][key] = str(Path(value).expanduser().resolve())
        for section in ("embedding", "rerank"):
            model = (data.get(section) or {}).get("model")
            if isinstance(model, str) and model and not Path(model).is_absolute() and Path(model).expanduser().is_dir():
                data[section]["model"] = str(Path(model).expanduser().resolve())
        return data

    def dataset_content_hash(self) -> str:
        """Hash of the dataset folder's files (documents, questions, judgements); "unavailable" when the folder
        cannot be found (the run itself then fails with the loader's message)."""
        try:
            folder, _ = resolve_dataset_path(self.dataset)
        except DatasetError:
            return "unavailable"
        if self.dataset.questions_from:  # the questions come from MLflow: their records are part of the content
            questions = questions_digest(self.dataset.questions_from, self.dataset.questions_tracking_uri)
            return stable_hash([folder_content_hash(folder), questions])
        return folder_content_hash(folder)

    def run_key(self) -> str:
        """Content hash of what determines results: the config (not the name, tracking or sweep block) and the
        dataset's content, so an edited dataset never reuses a finished run of the old one."""
        return stable_hash(self.run_key_payload(), length=16)

    def run_key_payload(self) -> dict:
        """What ``run_key`` hashes: the resolved config less what cannot change a result, plus the dataset's
        content hash."""
        data = self.resolved()
        for key in ("name", "description", "tracking", "sweep", "variants", "workspace", "llm",  # llm: retries, prices
                    "recommend"):  # how a sweep's end picks among results, not a result
            data.pop(key, None)
        for guard in ("strict", "max_document_chars"):  # they refuse data or let the same data through: results
            data["dataset"].pop(guard, None)            # never differ
        if data["dataset"].get("judged_qrels") is None:  # added after runs were logged: unset, old run keys hold
            data["dataset"].pop("judged_qrels", None)
            data["dataset"].pop("judged_qrels_use", None)
        if data["dataset"].get("questions_from") is None:
            data["dataset"].pop("questions_from", None)
        data["dataset"].pop("questions_tracking_uri", None)  # where they are read from: their digest is hashed
        data["embedding"] = self.embedding.run_key_view(data["embedding"])  # languages, drift gate: no vector
        # sections and knobs added after runs were logged: left out at their defaults, so old run keys hold
        if not self.query.active:
            data.pop("query", None)
        if not self.context.enabled:
            data.pop("context", None)
        if not self.enrichment.code_examples.enabled:
            data["enrichment"].pop("code_examples", None)
        if self.retrieval.fusion_level == "document":
            data["retrieval"].pop("fusion_level", None)
        data["retrieval"] = self.retrieval.run_key_view(data["retrieval"])  # its late knobs, stop word files
        if not self.evaluation.ragas:
            for key in ("ragas", "ragas_k", "ragas_llm"):
                data["evaluation"].pop(key, None)
        # keys renamed since runs were logged are hashed under their old names, so renaming orphans no run
        for section in (data["retrieval"]["fusion"], data["rerank"], data.get("query", {}).get("expansion", {})):
            if "strategy" in section:
                section["method"] = section.pop("strategy")
        data["dataset_content"] = self.dataset_content_hash()
        if data["dataset"].get("path") and data["dataset_content"] != "unavailable":
            # where the folder is, not what it holds (hashed above): a sweep's winner.yaml, written with absolute
            # paths, and the sweep's own relative path give one run key, as does a folder moved elsewhere
            data["dataset"].pop("path")
        if not data["evaluation"].get("metrics"):  # added later: an empty list keeps the keys runs had before
            data["evaluation"].pop("metrics", None)
        if self.llm.policy.allow_partial and self.llm_stages():  # a run that may rest on fallbacks never stands in
            data["llm_allow_partial"] = True                     # for a strict one; without an LLM stage it cannot
        return data

    def llm_stages(self) -> list[str]:
        """The sections of this config that ask a chat model (what ``llm.policy`` holds to its floor)."""
        q = self.query
        stages = {"enrichment": self.enrichment.enabled,
                  "enrichment.code_examples": self.enrichment.code_examples.enabled,
                  "query.expansion": q.expansion.enabled and q.expansion.strategy == "llm",
                  "query.decomposition": q.decomposition.enabled, "query.hyde": q.hyde.enabled,
                  "rerank": self.rerank.enabled and self.rerank.strategy == "llm",
                  "evaluation.ragas_llm": bool(self.evaluation.ragas)}
        return [name for name, on in stages.items() if on]



def latency_stage_problem(experiments: list[Experiment]) -> str | None:
    """Why the latency budget of configs compared together holds nothing, or None: its stage
    (``recommend.latency_stage``) is one none of them times. A config without the stage spends 0 ms in it; with
    no config timing it, every config would pass the budget."""
    recommend = experiments[0].recommend if experiments else None
    if recommend is None or recommend.latency_budget_ms is None:
        return None
    timed = list(dict.fromkeys(stage for e in experiments for stage in e.latency_stages()))
    if recommend.latency_stage in timed:
        return None
    return (f"recommend.latency_stage: no config here has the stage {recommend.latency_stage!r}, so the "
            f"{recommend.latency_budget_ms:g} ms budget would hold nothing; these configs time {', '.join(timed)}")


# --------------------------------------------------------------------------- loading
MAX_CONFIG_BYTES = 5 * 1024 * 1024
MAX_YAML_VALUES = 100_000  # values after alias expansion; a real config or sweep has a few hundred
MAX_LISTED_PROBLEMS = 20
MAX_YAML_DEPTH = 50  # nesting levels; a config nests five or six


class _YamlProblem(Exception):
    def __init__(self, line: int | None, message: str):
        super().__init__(message)
        self.line, self.message = line, message


class ConfigLoader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses duplicate keys and alias bombs.

    PyYAML keeps the last of two equal keys, so a repeated knob silently overrides the first. Aliases
    share one object when loaded, but validation and error messages walk the expanded tree: nine nested
    aliases of nine make 9**9 values, minutes of work and gigabytes of echoed input.
    """

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *defaults` keys may be overridden; that is what a merge is for
            key, line = self.construct_object(key_node, deep=True), key_node.start_mark.line + 1
            try:
                first = seen.get(key)
            except TypeError:
                continue  # an unhashable key: the base loader reports it
            if first is not None:
                raise _YamlProblem(line, f"duplicate key {shorten(key)} (first at line {first}); keep one of them")
            seen[key] = line
        return super().construct_mapping(node, deep)

    def get_single_node(self):
        node = super().get_single_node()
        if node is not None:
            _expanded_size(node, {}, MAX_YAML_VALUES)
        return node


def _expanded_size(node, sizes: dict[int, int | None], limit: int, depth: int = 0) -> int:
    """Values ``node`` expands to with every alias copied out; _YamlProblem past ``limit``, on a cycle or
    past ``MAX_YAML_DEPTH`` levels."""
    if depth > MAX_YAML_DEPTH:
        raise _YamlProblem(node.start_mark.line + 1, f"nested more than {MAX_YAML_DEPTH} levels deep; a config "
                           "nests a few sections, flatten the data")
    key = id(node)
    if key in sizes:
        if sizes[key] is None:
            raise _YamlProblem(node.start_mark.line + 1, "an alias refers to the collection it is in (a "
                               "recursive structure); write the values out")
        return sizes[key]
    sizes[key] = None
    if isinstance(node, yaml.MappingNode):
        size = 1 + sum(_expanded_size(k, sizes, limit, depth + 1) + _expanded_size(v, sizes, limit, depth + 1)
                       for k, v in node.value)
    elif isinstance(node, yaml.SequenceNode):
        size = 1 + sum(_expanded_size(item, sizes, limit, depth + 1) for item in node.value)
    else:
        size = 1
    if size > limit:
        raise _YamlProblem(node.start_mark.line + 1, f"aliases expand to more than {limit:,} values (an alias "
                           "bomb?); write the values out or use fewer nested aliases")
    sizes[key] = size
    return size


def _parse_yaml(text: str) -> Any:
    loader = ConfigLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def load_yaml_text(text: str, origin: str) -> Any:
    """YAML through ``ConfigLoader``; every problem a one-line ConfigError naming ``origin`` and the line."""
    try:
        return _parse_yaml(text)
    except _YamlProblem as e:
        raise ConfigError(f"{origin}:{e.line}: {e.message}") from None
    except RecursionError:  # PyYAML composes nested collections recursively
        raise ConfigError(f"{origin}: nested too deeply to read; a config nests a few sections, flatten the "
                          "data") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"{origin}: not valid YAML{where}: {problem[:200]}; check the indentation and "
                          "quoting near that line") from None


def read_yaml_mapping(path: str | Path, example: str = "configs/quickstart.yaml") -> dict[str, Any]:
    """A YAML file whose top level is a mapping (an experiment or a sweep); clear errors otherwise."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path} (give a YAML file, e.g. {example})")
    try:
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise ConfigError(f"{path}: {size:,} bytes is too large for a config (at most {MAX_CONFIG_BYTES:,}); "
                              "give an experiment or sweep YAML, not data")
        raw = path.read_bytes()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the config ({e.strerror or e}); check its permissions") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise ConfigError(f"{path}:{line}: not UTF-8 (byte {e.start}); save the config as UTF-8") from None
    data = load_yaml_text(text, str(path))
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections, got {type(data).__name__}")
    return data


def load_experiment(source: str | Path | dict[str, Any], overrides: list[str] | None = None) -> Experiment:
    """Load and validate a config from a YAML path or a dict, applying ``a.b.c=value`` overrides."""
    if isinstance(source, dict):
        data, origin = copy.deepcopy(source), "<dict>"
    else:
        data, origin = read_yaml_mapping(source), str(source)
    apply_set_items(data, overrides)
    return validate_experiment(data, origin)


# dotted paths renamed since configs were written: the old path still works, and says the new one once
RENAMED_PATHS = {"retrieval.fusion.method": "retrieval.fusion.strategy", "rerank.method": "rerank.strategy",
                 "query.expansion.method": "query.expansion.strategy"}


def current_path(path: str) -> str:
    """``path`` under its name now (``retrieval.fusion.method`` -> ``retrieval.fusion.strategy``)."""
    if path in RENAMED_PATHS:
        deprecated(path, RENAMED_PATHS[path])
        return RENAMED_PATHS[path]
    return path


# sections whose extra keys are the knobs of the strategy their ``strategy`` key names
STRATEGY_SECTIONS = {"chunking": ChunkingConfig, "retrieval.fusion": FusionConfig, "rerank": RerankConfig}
LIST_TOPICS = {"chunking": "chunkers", "retrieval.fusion": "fusions", "rerank": "rerankers"}  # `kbench list TOPIC`


def drop_foreign_knobs(data: dict[str, Any], overridden: set[str]) -> list[str]:
    """After an override picks another strategy (``--set chunking.strategy=smart``, a sweep variant), drop the
    knobs the chosen strategy lacks but a sibling strategy has: ``chunk_overlap`` means nothing to ``smart``. A
    knob no strategy knows stays, for validation to report. Returns the dropped knobs as dotted paths."""
    dropped = []
    for section, model in STRATEGY_SECTIONS.items():
        if f"{section}.strategy" not in overridden:
            continue
        node = get_dotted(data, section)
        if not isinstance(node, dict) or "strategy" not in node:
            continue
        registry = model.registry
        if node["strategy"] not in registry.names():
            continue  # an unknown name: validation reports it with the allowed names
        own = set(registry.get(node["strategy"]).params.model_fields)
        known = {f for name in registry.names() for f in registry.get(name).params.model_fields}
        for knob in [k for k in node if k not in model.model_fields and k != "method" and k not in own and k in known]:
            del node[knob]
            dropped.append(f"{section}.{knob}")
    return dropped


def apply_set_items(data: dict[str, Any], overrides: list[str] | None) -> dict[str, Any]:
    """Each ``section.key=value`` into ``data``; a strategy switch drops the old strategy's knobs, saying so."""
    paths = set()
    for item in overrides or []:
        path, value = parse_override(item)
        paths.add(current_path(path))
        set_dotted(data, current_path(path), value)
    by_section: dict[str, list[str]] = {}
    for knob in drop_foreign_knobs(data, paths):
        section, _, name = knob.rpartition(".")
        by_section.setdefault(section, []).append(name)
    for section, knobs in by_section.items():
        strategy = get_dotted(data, section)["strategy"]
        note(f"--set {section}.strategy={strategy}: left out {', '.join(knobs)}, knobs of another strategy "
             f"(`kbench list {LIST_TOPICS[section]}` shows each strategy's knobs)")
    return data


def validate_experiment(data: dict[str, Any], origin: str = "<dict>") -> Experiment:
    try:
        return Experiment.model_validate(data)
    except ValidationError as e:
        errors = e.errors()
        lines = [_cut(format_error(err, "", Experiment)) for err in errors[:MAX_LISTED_PROBLEMS]]
        if len(errors) > MAX_LISTED_PROBLEMS:  # a list of 50,000 bad items is one mistake, not 50,000 lines
            lines.append(f"... and {len(errors) - MAX_LISTED_PROBLEMS} more problems like these")
        raise ConfigError(f"{origin}: invalid config\n  - " + "\n  - ".join(lines)) from None


def _cut(line: str, limit: int = 600) -> str:
    # the last guard on echoed input: a section may quote a bad value whole
    return line if len(line) <= limit else f"{line[:limit]}... ({len(line)} characters)"


def parse_override(item: str) -> tuple[str, Any]:
    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected section.key=value, e.g. chunking.chunk_size=400")
    key, raw = item.split("=", 1)
    try:
        value = _parse_yaml(raw) if raw != "" else ""
    except _YamlProblem as e:  # a duplicate key or an alias bomb is refused, not taken as a string
        raise ConfigError(f"--set {item[:80]!r}: {e.message}") from None
    except RecursionError:
        raise ConfigError(f"--set {item[:80]!r}: nested too deeply; give a plain value") from None
    except yaml.YAMLError:
        value = raw
    return key.strip(), value
