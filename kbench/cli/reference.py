"""What every config section, knob and registry holds, read from the code: the settings reference and `kbench list`.

The config models (each stage's section, each registered strategy's params model) are the one source. A knob's
type and default come from its annotation and default, the allowed values from a ``Literal``, a constraint
(``ge``, ``le``, ``min_length``) or the registry that names it, the description from ``Field(description=...)``,
and the unit from ``Field(json_schema_extra=unit(...))`` or, failing that, the knob's name (``_s`` seconds,
``_ms`` milliseconds, ``_chars`` characters, ``_bytes`` bytes, ``_tokens`` tokens).

    python tools/settings_reference.py          # writes docs/settings/*.md
    kbench list chunkers                        # the same knobs, as a table in the terminal
"""
from __future__ import annotations

import json
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal, Union, get_args, get_origin

from annotated_types import Ge, Gt, Le, Lt, MaxLen, MinLen
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from kbench.chunking.registry import CHUNKERS
from kbench.config import Experiment
from kbench.embedding.registry import EMBEDDING_PROVIDERS
from kbench.indexes.registry import UNIT_KINDS
from kbench.registry import Registry, StrategySection
from kbench.retrieval.presets import PRESETS
from kbench.retrieval.registry import FUSIONS, LEGS, RERANKERS
from kbench.retrieval.units import LegUnit
from kbench.store.registry import STORE_BACKENDS

SUFFIX_UNITS = {"_s": "seconds", "_ms": "milliseconds", "_chars": "characters", "_bytes": "bytes",
                "_tokens": "tokens"}
# fields whose values are the names of a registry's entries (strategy sections know their own registry)
NAMED_BY = {"retrieval.legs": LEGS.names(), "embedding.provider": EMBEDDING_PROVIDERS.names(),
            "store.backend": STORE_BACKENDS.names(), "retrieval.preset": sorted(PRESETS)}


@dataclass
class Knob:
    path: str  # dotted config path, e.g. chunking.chunk_size
    type: str
    default: str
    unit: str
    allowed: str
    description: str

    def row(self) -> list[str]:
        return [self.path, self.type, self.default, self.unit, self.allowed, self.description]


@dataclass
class Group:
    """One table: a section, a nested section, or one strategy's knobs."""

    title: str
    path: str  # where its knobs sit in a config
    summary: str
    knobs: list[Knob] = field(default_factory=list)
    chosen_by: str = ""  # for a strategy's knobs: the key and value that choose it, e.g. chunking.strategy: ast


HEADERS = ["knob", "type", "default", "unit", "allowed", "description"]


def type_name(annotation: Any) -> str:
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        return type_name(get_args(annotation)[0])
    if origin is Literal:
        return "str" if all(isinstance(a, str) for a in get_args(annotation)) else "literal"
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        name = " or ".join(type_name(a) for a in args)
        return f"{name} or null" if len(args) < len(get_args(annotation)) else name
    if origin in (list, tuple, set):
        args = get_args(annotation)
        return f"list of {type_name(args[0])}" if args else "list"
    if origin is dict:
        args = get_args(annotation)
        return f"map of {type_name(args[0])} to {type_name(args[1])}" if args else "map"
    if annotation is Any:
        return "any"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    return getattr(annotation, "__name__", str(annotation))


def literal_values(annotation: Any) -> list[Any]:
    """Every Literal value the annotation allows, through unions, lists and dict values."""
    origin = get_origin(annotation)
    if origin is Literal:
        return list(get_args(annotation))
    out: list[Any] = []
    for arg in get_args(annotation):
        out += [v for v in literal_values(arg) if v not in out]
    return out


def shown(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    return json.dumps(value, ensure_ascii=False) if not isinstance(value, str) or not value else value


def default_of(info) -> str:
    if info.default is not PydanticUndefined:
        return shown(info.default)
    if info.default_factory is not None:
        return shown(info.default_factory())
    return "required"


def allowed_of(info, path: str, names: list[str] | None) -> str:
    values = names if names is not None else literal_values(info.annotation)
    parts = [", ".join(str(v) for v in values)] if values else []
    for meta in info.metadata:
        for kind, sign, attr in ((Ge, ">=", "ge"), (Gt, ">", "gt"), (Le, "<=", "le"), (Lt, "<", "lt")):
            if isinstance(meta, kind):
                parts.append(f"{sign} {getattr(meta, attr)}")
        if isinstance(meta, MinLen) and meta.min_length:
            parts.append(f"at least {meta.min_length} item{'s' * (meta.min_length > 1)}")
        if isinstance(meta, MaxLen):
            parts.append(f"at most {meta.max_length} items")
    return "; ".join(parts)


def unit_of(name: str, info) -> str:
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    if "unit" in extra:
        return str(extra["unit"])
    return next((unit for suffix, unit in SUFFIX_UNITS.items() if name.endswith(suffix)), "")


def model_knobs(model: type[BaseModel], prefix: str) -> tuple[list[Knob], list[tuple[str, type[BaseModel]]]]:
    """The knobs of ``model`` under ``prefix``, and its nested sections (path, model) to document apart."""
    knobs, nested = [], []
    for name, info in model.model_fields.items():
        path = f"{prefix}.{name}" if prefix else name
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            nested.append((path, annotation))
            continue
        names = NAMED_BY.get(path)
        if issubclass(model, StrategySection) and name == model.name_field:
            names = model.registry.names()
        knobs.append(Knob(path, type_name(annotation), default_of(info), unit_of(name, info),
                          allowed_of(info, path, names), " ".join((info.description or "").split())))
    return knobs, nested


def section_groups(model: type[BaseModel], path: str, title: str | None = None) -> list[Group]:
    """A section's own table, then one per nested section, depth first."""
    knobs, nested = model_knobs(model, path)
    doc = (model.__doc__ or "").strip().split("\n\n")[0]
    groups = [Group(title or path, path, " ".join(doc.split()) if doc and not doc.startswith(("Base", "!!!"))
                    and model.__doc__ is not BaseModel.__doc__ else "", knobs)]
    for sub_path, sub in nested:
        groups += section_groups(sub, sub_path)
    return groups


def registry_groups(registry: Registry, path: str) -> list[Group]:
    """One table per registered strategy: its summary and its params model's knobs under ``path`` (a leg's
    ``<name>`` in the path is its name; a strategy's knobs sit beside the key that names it)."""
    groups = []
    for name in registry.names():
        entry = registry.get(name)
        where = path.replace("<name>", name)
        knobs, _ = model_knobs(entry.params, where)
        chosen_by = "" if "<name>" in path else f"{registry.field}: {name}"
        groups.append(Group(name, where, " ".join(entry.summary.split()), knobs, chosen_by))
    return groups


# The settings pages: one per stage, each the sections that stage owns and the strategies it registers.
def pages() -> dict[str, tuple[str, str, list[Group]]]:
    """page slug -> (title, introduction, groups)."""
    fields = Experiment.model_fields
    top = [Knob(n, type_name(fields[n].annotation), default_of(fields[n]), unit_of(n, fields[n]),
                allowed_of(fields[n], n, None), " ".join((fields[n].description or "").split()))
           for n in ("name", "description", "workspace", "sweep", "variants")]
    return {
        "experiment": ("Experiment", "The top-level keys of a config file; every other key is a stage's section "
                       "(one page each).", [Group("top level", "", "", top)]),
        "dataset": ("dataset", "What is loaded: a registered dataset or a folder, the sample, the sources' "
                    "globs, judged qrels.", section_groups(fields["dataset"].annotation, "dataset")),
        "chunking": ("chunking", "`chunking.strategy` names a chunker; its knobs sit beside it "
                     "(`chunking: {strategy: smart, chunk_size: 600}`).",
                     section_groups(fields["chunking"].annotation, "chunking")
                     + registry_groups(CHUNKERS, "chunking")),
        "enrichment": ("enrichment", "Contextual enrichment and the code-example index, through an "
                       "OpenAI-compatible chat endpoint.", section_groups(fields["enrichment"].annotation,
                                                                          "enrichment")),
        "llm": ("llm", "The policy and prices of the one LLM client every LLM stage uses (outside the run key).",
                section_groups(fields["llm"].annotation, "llm")),
        "embedding": ("embedding", "The encoder of chunks and queries, its runtime and its speed knobs.",
                      section_groups(fields["embedding"].annotation, "embedding")),
        "store": ("store", "Where the vectors live and how they are indexed.",
                  section_groups(fields["store"].annotation, "store")),
        "query": ("query", "What is searched instead of (or beside) the question: expansion, decomposition, "
                  "HyDE.", section_groups(fields["query"].annotation, "query")),
        "retrieval": ("retrieval", "Legs (each on its index of units), fusion, filters, grouping. A leg's knobs "
                      "sit under `retrieval.leg_params.<leg>`, a fusion's beside `retrieval.fusion.strategy`.",
                      section_groups(fields["retrieval"].annotation, "retrieval")
                      + [Group("Legs", "retrieval.leg_params.<leg>", "Every leg takes these, beside its own "
                               "knobs (below): the index it searches and, across units, how a document scores.",
                               model_knobs(LegUnit, "retrieval.leg_params.<leg>")[0])]
                      + registry_groups(LEGS, "retrieval.leg_params.<name>")
                      + [Group("Fusions", "retrieval.fusion", "Each fusion's knobs, beside "
                               "`retrieval.fusion.strategy`.")]
                      + registry_groups(FUSIONS, "retrieval.fusion")
                      + [unit_group()]),
        "rerank": ("rerank", "`rerank.strategy` names a reranker; its knobs sit beside it.",
                   section_groups(fields["rerank"].annotation, "rerank") + registry_groups(RERANKERS, "rerank")),
        "context": ("context", "Context assembly: the ranking packed into a token budget, as an LLM would get it.",
                    section_groups(fields["context"].annotation, "context")),
        "evaluation": ("evaluation", "Which metrics at which cut-offs, the overlap rule of span datasets, "
                       "budgets, slices, ragas.", section_groups(fields["evaluation"].annotation, "evaluation")),
        "tracking": ("tracking", "MLflow: where runs go, their names and tags, the traces (outside the run key).",
                     section_groups(fields["tracking"].annotation, "tracking")),
        "recommend": ("recommend", "What a sweep, a search and `kbench compare` recommend by: the margin a cheaper "
                      "config must be shown within, the quality guards, the cost and the budgets (outside the run "
                      "key; [the recommendation](../how-to/recommendation.md)).",
                      section_groups(fields["recommend"].annotation, "recommend")),
    }


def unit_group() -> Group:
    """`retrieval.leg_params.<leg>.unit`: ``chunk``, a unit kind, or a chunking of the leg's own."""
    knobs = [Knob("chunk", "", "", "", "", "the run's own chunking (the `chunking` section): the default")]
    for name in UNIT_KINDS.names():
        summary = " ".join(UNIT_KINDS.get(name).summary.split())
        if name == "chunking":  # not a name a config writes: a chunker's name or a chunking section selects it
            knobs.append(Knob("<chunker> or {strategy: ...}", "", "", "", ", ".join(CHUNKERS.names()), summary))
        else:
            knobs.append(Knob(name, "", "", "", "", summary))
    return Group("Units", "retrieval.leg_params.<leg>.unit", "What a leg's `unit` may name: the index it searches "
                 "(kbench/indexes).", knobs)


GENERATED = "<!-- generated by `python tools/settings_reference.py` from the config models: do not edit -->"


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ") if text else ""


def code(text: str) -> str:
    return f"`{text}`" if text else ""


def markdown_page(slug: str, title: str, intro: str, groups: list[Group]) -> str:
    lines = [GENERATED, "", f"# {title}", "", intro, ""]
    for group in groups:
        heading = "##" if group.title in ("Legs", "Fusions", "Units") or group.path in ("", slug) else "###"
        lines += [f"{heading} {group.title}", ""]
        if group.chosen_by:
            lines += [f"`{group.chosen_by}`." + (f" {group.summary}" if group.summary else ""), ""]
        elif group.path and group.title != group.path:
            lines += [f"Under `{group.path}`." + (f" {group.summary}" if group.summary else ""), ""]
        elif group.summary:
            lines += [group.summary, ""]
        if not group.knobs:
            if group.title != "Fusions":
                lines += ["No knobs.", ""]
            continue
        lines += ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
        for k in group.knobs:
            lines.append("| " + " | ".join([code(k.path.removeprefix(group.path + ".") if group.path else k.path),
                                            cell(k.type), code(cell(k.default)), cell(k.unit),
                                            cell(k.allowed), cell(k.description)]) + " |")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def index_page(all_pages: dict[str, tuple[str, str, list[Group]]]) -> str:
    lines = [GENERATED, "", "# Settings reference", "",
             "Every section and knob of a config file, read from the config models: its type, default, unit, "
             "allowed values and what it does. `kbench list TOPIC` prints the same for one registry in the "
             "terminal; `kbench run CONFIG` saves the resolved config (every default filled in) as `config.yaml` "
             "beside each run.", "", "| page | what |", "|---|---|"]
    for slug, (title, intro, groups) in all_pages.items():
        count = sum(len(g.knobs) for g in groups if g.title != "Units")
        lines.append(f"| [{title}]({slug}.md) | {cell(intro)} ({count} knobs) |")
    return "\n".join(lines) + "\n"


def render_all() -> dict[str, str]:
    """file name -> text of every settings page (docs/settings/)."""
    all_pages = pages()
    out = {"index.md": index_page(all_pages)}
    for slug, (title, intro, groups) in all_pages.items():
        out[f"{slug}.md"] = markdown_page(slug, title, intro, groups)
    return out


def every_knob() -> list[Knob]:
    return [k for _, (_, _, groups) in pages().items() for g in groups if g.title != "Units" for k in g.knobs]
