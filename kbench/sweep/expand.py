"""Expand a config's ``sweep:`` grid and ``variants:`` into one validated Experiment per config.

    sweep:                              # every combination (a grid), keys are dotted config paths
      chunking.chunk_size: [300, 600]
      retrieval.top_k: [5, 20]
    variants:                           # named override sets, run beside the grid
      - name: whole-docs
        chunking.strategy: none

The baseline is the config without its sweep/variants blocks. Each expanded config is the baseline with
its overrides applied. Two kinds of override, on purpose:
- **a mapping replaces that section**: ``chunking: [{strategy: recursive}, {strategy: markdown}]`` runs each
  chunker with its own defaults (recursive 1000/200, markdown 2000/200), never the baseline's chunk_size;
- **a dotted path sets one knob** and keeps the rest of the section: ``chunking.strategy: [fixed, recursive]``
  keeps the knobs the strategies share (both run at the baseline's chunk_size). When such an override picks
  another strategy (chunking.strategy, retrieval.fusion.strategy, rerank.strategy), knobs that the new
  strategy does not have but another registered strategy does are dropped (``chunk_size`` means nothing to
  ``none``), so a grid may cross strategies with their knobs; a knob no strategy knows is still an error.
A mapping that is one knob's value (``retrieval.leg_params``, a metadata filter, tracking tags) is that value.

Labels are short: ``chunk_size=300,top_k=5`` for scalars, a section's strategy name for a mapping
(``chunking=markdown``; ``fixed-1``, ``fixed-2`` when one strategy appears twice on an axis), ``<knob>#<n>``
for a long value; ``label_legend`` says what each stands for and ``kbench.sweep.summary`` shows every
config's resolved knobs that differ between configs. A sweep of variants only runs the baseline too (label
``baseline``, first), so each variant is compared with what it changes; a grid runs the points it lists
(include the baseline's value in an axis to run it). Configs that resolve to the same content (same run
key) are run once, under the first label.

``SweepPlan.warnings`` says what would make a comparison unfair, e.g. a grid whose ``retrieval.top_k`` drops
below an evaluated k: those configs return fewer results than the metric counts, so they lose by
construction.
"""
from __future__ import annotations

import copy
import hashlib
import shlex
import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbench.config import (STRATEGY_SECTIONS, ConfigError, Experiment, apply_set_items, current_path,
                           drop_foreign_knobs, latency_stage_problem, read_yaml_mapping, set_dotted,
                           validate_experiment)
from kbench.config import MAX_NAME_CHARS
from kbench.dotted import flatten_dotted
from kbench.hashing import stable_hash
from kbench.registry import Registry
from kbench.sweep.search import SearchConfig, check_candidates, parse_search
from kbench.tracking.mlflow_run import flatten

BASELINE_LABEL = "baseline"  # the label of the baseline config a variants-only sweep adds
MAX_VALUE_LABEL = 24  # characters of a value shown in a label; a longer one is named by its place on its axis
# parts of the resolved config that do not change results (and so never make a knob)
NOT_KNOBS = ("name", "description", "workspace", "tracking", "sweep", "variants", "recommend", "search")


@dataclass
class SweepConfig:
    """One config of a sweep: its label, the Experiment, the knobs that differ from the baseline."""

    label: str
    experiment: Experiment
    knobs: dict[str, str]  # dotted path -> value (as logged in MLflow params), only where != baseline
    overrides: dict[str, Any]  # what the sweep/variant set, as written
    aliases: list[str] = field(default_factory=list)  # labels of grid points that resolved to the same config
    resolved_knobs: dict[str, str] = field(default_factory=dict)  # every knob of the resolved config, flattened

    @property
    def run_key(self) -> str:
        return self.experiment.run_key()


@dataclass
class SweepPlan:
    name: str
    baseline: Experiment
    configs: list[SweepConfig]
    sweep_key: str
    raw: dict[str, Any]  # the config without its sweep blocks
    raw_blocks: dict[str, Any] = field(default_factory=dict)  # {"sweep": ..., "variants": ...} as written
    warnings: list[str] = field(default_factory=list)  # what makes some configs lose by construction
    notes: list[str] = field(default_factory=list)  # what a reader should know, e.g. the baseline does not run
    legend: dict[str, str] = field(default_factory=dict)  # a shortened label part -> the value it stands for
    search: SearchConfig = field(default_factory=SearchConfig)  # the search: block (grid, race, stagewise)
    command: str = ""  # how to run it again: the config file and its --set overrides (load_sweep)

    def by_label(self) -> dict[str, SweepConfig]:
        return {c.label: c for c in self.configs}


def sweep_config_name(base: str, label: str) -> str:
    """``base[label]``; a name past what MLflow and the run folder take is cut and made unique by a hash of
    the label (the run key never depends on the name)."""
    name = f"{base}[{label}]"
    if len(name) <= MAX_NAME_CHARS:
        return name
    return f"{name[:MAX_NAME_CHARS - 12]}~{stable_hash(label, 8)}]"


def _is_knob_mapping(path: str) -> bool:
    """A mapping that is one knob's value (set whole), not a section."""
    return path == "retrieval.leg_params" or path.endswith(("filters.metadata", "tracking.tags"))


def _flatten_overrides(overrides: dict[str, Any]) -> dict[str, Any]:
    """Dotted paths of the knobs ``overrides`` sets one by one (``{chunking.strategy: none}``); a knob whose
    value is itself a mapping (leg_params, a metadata filter, tags) is set whole."""
    return flatten_dotted(overrides, is_leaf=lambda path, value: _is_knob_mapping(path))


def _is_section_value(path: str, value: Any) -> bool:
    """An override that replaces a section: a mapping written at a section's path."""
    return isinstance(value, dict) and not _is_knob_mapping(path)


def apply_overrides(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """The baseline with ``overrides`` applied: a mapping replaces the section at its path (first), then each
    dotted knob is set in what is there."""
    data = copy.deepcopy(base)
    sections = {current_path(p): v for p, v in overrides.items() if _is_section_value(p, v)}
    knobs = {current_path(path): value for path, value in
             _flatten_overrides({p: v for p, v in overrides.items() if not _is_section_value(p, v)}).items()}
    for path, value in sections.items():
        set_dotted(data, path, copy.deepcopy(value))
    for path, value in knobs.items():
        set_dotted(data, path, value)
    # a replaced strategy section chose its strategy too: dotted knobs of another axis it lacks are dropped
    switched = set(knobs) | {f"{p}.strategy" for p in sections if p in STRATEGY_SECTIONS}
    drop_foreign_knobs(data, switched)
    return data


def knob_diff(experiment: Experiment, baseline: Experiment) -> dict[str, str]:
    """Flattened params of ``experiment`` whose value differs from the baseline's (or that it lacks)."""
    mine = resolved_knobs(experiment)
    base = resolved_knobs(baseline)
    return {k: v for k, v in mine.items() if base.get(k) != v}


def resolved_knobs(experiment: Experiment) -> dict[str, str]:
    """Every knob of the resolved config that can change a result, flattened as MLflow params are."""
    return flatten({k: v for k, v in experiment.resolved().items() if k not in NOT_KNOBS})


def _strategy_name(value: dict[str, Any]) -> str | None:
    name = value.get("strategy", value.get("method"))
    return str(name) if isinstance(name, (str, int, float)) and not isinstance(name, bool) else None


def axis_labels(path: str, values: list[Any]) -> list[str]:
    """The short label part of each value of one axis: ``tail=value``; a section by its strategy name
    (numbered when the axis holds it twice); ``tail#n`` (its place on the axis) for every value of an axis
    where one value is too long to read in a label."""
    tail = path.rsplit(".", 1)[-1]
    names = [_strategy_name(v) if _is_section_value(path, v) else None for v in values]
    texts = [_label_value(v) for v in values]
    readable = all(len(t) <= MAX_VALUE_LABEL and not _is_section_value(path, v) for t, v in zip(texts, values))
    seen: dict[str, int] = {}
    parts = []
    for n, (name, text) in enumerate(zip(names, texts), start=1):
        if name is not None and len(name) <= MAX_VALUE_LABEL:
            if names.count(name) > 1:
                seen[name] = seen.get(name, 0) + 1
                name = f"{name}-{seen[name]}"
            parts.append(f"{tail}={name}")
        else:
            parts.append(f"{tail}={text}" if readable else f"{tail}#{n}")
    return parts


def _point_label(point: dict[str, Any], parts: dict[str, str]) -> str:
    """``chunk_size=300,top_k=5``; a key's full path where two axes end in the same name."""
    tails = [p.rsplit(".", 1)[-1] for p in point]
    out = []
    for path, tail in zip(point, tails):
        part = parts[path]
        out.append(part if tails.count(tail) == 1 else path + part[len(tail):])
    return ",".join(out) or BASELINE_LABEL


def _label_value(value: Any) -> str:
    """A list of names reads ``[vector,bm25]``; other lists and mappings as JSON."""
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
        return "[" + ",".join(str(v) for v in value) + "]"
    return json.dumps(value) if isinstance(value, (list, dict)) else str(value)


def grid_points(sweep: dict[str, list[Any]]) -> list[dict[str, Any]]:
    return [point for _, point in labelled_grid_points(sweep)[0]]


def labelled_grid_points(sweep: dict[str, list[Any]]) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, str]]:
    """Every combination with its short label, and the legend of the label parts that stand for a value
    (``chunking=markdown`` -> ``{"strategy": "markdown"}``)."""
    for path, values in sweep.items():
        if not isinstance(values, list) or not values:
            raise ConfigError(f"sweep.{path}: give a non-empty list of values, e.g. [300, 600], got {values!r}")
    keys = list(sweep)
    parts = {k: axis_labels(k, sweep[k]) for k in keys}
    legend = {}
    for k in keys:
        for part, value in zip(parts[k], sweep[k]):
            if part != f"{k.rsplit('.', 1)[-1]}={_label_value(value)}":
                legend[part] = _label_value(value)
    points = []
    for combo in itertools.product(*(range(len(sweep[k])) for k in keys)):
        point = {k: sweep[k][i] for k, i in zip(keys, combo)}
        points.append((_point_label(point, {k: parts[k][i] for k, i in zip(keys, combo)}), point))
    return points, legend


def grid_factors(sweep: dict[str, list[Any]]) -> tuple[dict[str, dict[str, str]], dict[str, list[str]]]:
    """The grid as a factorial design: per point label, its level of each factor, and each factor's levels in
    axis order (the first is the reference). A factor is named by its axis path's last name (the full path where
    two axes end alike); a level by its label part (``400``, ``markdown``, ``#2``)."""
    if not sweep:
        return {}, {}
    tails = [p.rsplit(".", 1)[-1] for p in sweep]
    names = {p: (t if tails.count(t) == 1 else p) for p, t in zip(sweep, tails)}
    parts = {p: [part[len(p.rsplit(".", 1)[-1]):].removeprefix("=") for part in axis_labels(p, sweep[p])]
             for p in sweep}
    factors = {names[p]: parts[p] for p in sweep}
    combos = itertools.product(*(range(len(sweep[p])) for p in sweep))  # the order labelled_grid_points uses
    levels = {label: {names[p]: parts[p][i] for p, i in zip(sweep, combo)}
              for (label, _), combo in zip(labelled_grid_points(sweep)[0], combos)}
    return levels, factors


def check_grid_size(sweep: dict[str, Any], variants: list, search: SearchConfig, origin: str) -> None:
    """The grid's size counted, not built: every strategy (grid, race, stage-wise) expands and validates each point
    before the first runs, so a grid too large to hold is refused here (ConfigError naming the knob)."""
    lengths = {path: len(values) for path, values in sweep.items() if isinstance(values, list)}
    count = math.prod(lengths.values()) if sweep else 0
    widest = max(lengths, key=lengths.get) if lengths else None
    knob = f"give sweep.{widest} fewer values" if widest else "give variants: fewer entries"
    try:
        check_candidates(count + len(variants), search.max_configs, f"{origin}: the {search.strategy} search", knob)
    except ValueError as e:
        raise ConfigError(str(e)) from None


# the dataset knobs that choose which questions a config is scored on (the seed only picks a sample)
QUESTION_SET_KNOBS = ("name", "path", "split", "subset", "max_queries", "max_documents", "questions_from",
                      "questions_tracking_uri")


def question_set(experiment: Experiment) -> dict[str, Any]:
    dataset = experiment.dataset
    chosen = {knob: getattr(dataset, knob) for knob in QUESTION_SET_KNOBS}
    if dataset.max_queries or dataset.max_documents:
        chosen["seed"] = dataset.seed
    return chosen


def check_one_question_set(configs: list[SweepConfig], origin: str) -> None:
    """A sweep ranks configs by paired differences over the same questions: configs on different question sets (a
    ``dataset.seed`` axis over a sample, another dataset) cannot be ranked, and once ran every config to end in
    "no config finished" with exit 0. Refused before anything runs, naming the knobs that differ."""
    sets = [question_set(c.experiment) for c in configs]
    differing = sorted({k for s in sets for k in s if any(s.get(k) != other.get(k) for other in sets)})
    if differing:
        knobs = ", ".join(f"dataset.{k}" for k in differing)
        verb = "differs" if len(differing) == 1 else "differ"
        raise ConfigError(f"{origin}: the configs would be scored on different question sets ({knobs} {verb} between "
                          "them); a sweep ranks configs on the same questions: run one sweep per value (kbench sweep "
                          f"FILE --set dataset.{differing[0]}=...) and compare the two with kbench compare --sets")


def expand_sweep(data: dict[str, Any], origin: str = "<dict>") -> SweepPlan:
    """Every config of a sweep, validated (all errors at once) before anything runs."""
    raw = copy.deepcopy(data)
    sweep = raw.pop("sweep", None) or {}
    variants = raw.pop("variants", None) or []
    search = parse_search(raw.pop("search", None), origin)
    if search.strategy == "tune" and (sweep or variants):
        raise ConfigError(f"{origin}: search: {{strategy: tune}} tunes the fusion of this config alone; remove the "
                          "sweep:/variants: blocks, or tune each config of interest in its own file")
    if not sweep and not variants and search.strategy != "tune":
        raise ConfigError(f"{origin}: no 'sweep:' grid and no 'variants:' list; nothing to sweep "
                          "(add e.g. sweep: {chunking.chunk_size: [300, 600]}, or use `kbench run`)")
    if not isinstance(sweep, dict):
        raise ConfigError(f"{origin}: sweep: must map dotted paths to lists of values, got {type(sweep).__name__}")
    if not isinstance(variants, list) or not all(isinstance(v, dict) for v in variants):
        raise ConfigError(f"{origin}: variants: must be a list of mappings (name: ..., path: value ...)")
    baseline = validate_experiment(raw, f"{origin} (baseline, without sweep/variants)")
    check_grid_size(sweep, variants, search, origin)

    points, legend = labelled_grid_points(sweep) if sweep else ([], {})
    if not sweep:  # variants only: run the baseline they vary, so the comparison has it
        points.append((BASELINE_LABEL, {}))
    for n, variant in enumerate(variants, start=1):
        variant = dict(variant)
        name = str(variant.pop("name", f"variant-{n}"))
        if not variant:
            raise ConfigError(f"{origin}: variants[{n - 1}] ({name}) sets nothing")
        points.append((name, variant))
    labels = [label for label, _ in points]
    dupes = sorted({x for x in labels if labels.count(x) > 1})
    if dupes:
        raise ConfigError(f"{origin}: config labels repeat: {dupes}; give each variant a distinct name")

    configs: dict[str, SweepConfig] = {}
    errors: list[str] = []
    for label, overrides in points:
        try:
            experiment = validate_experiment(apply_overrides(raw, overrides), f"{origin} [{label}]")
        except ConfigError as e:
            errors.append(str(e))
            continue
        experiment.name = sweep_config_name(baseline.name, label)
        key = experiment.run_key()
        if key in configs:
            configs[key].aliases.append(label)
            continue
        configs[key] = SweepConfig(label, experiment, knob_diff(experiment, baseline), overrides,
                                   resolved_knobs=resolved_knobs(experiment))
    if errors:
        raise ConfigError("\n".join(errors))
    check_one_question_set(list(configs.values()), origin)
    if problem := latency_stage_problem([c.experiment for c in configs.values()]):
        raise ConfigError(f"{origin}: {problem}")
    sweep_key = hashlib.sha256(json.dumps(
        {"name": baseline.name, "baseline": baseline.run_key(), "configs": sorted(configs)},
        sort_keys=True).encode()).hexdigest()[:16]
    plan = SweepPlan(baseline.name, baseline, list(configs.values()), sweep_key, raw,
                     {"sweep": sweep, "variants": variants}, legend=legend, search=search)
    plan.warnings = top_k_warnings(plan.configs)
    if plan.configs and all(c.knobs for c in plan.configs):
        plan.notes.append(f"the baseline (this config without its sweep blocks) is no point of the grid, so it does "
                          f"not run; comparisons take the first config, {plan.configs[0].label}, as baseline (add the "
                          "baseline's value to a grid axis to run it)")
    return plan


def top_k_warnings(configs: list[SweepConfig]) -> list[str]:
    """When configs keep different numbers of results (retrieval.top_k) and some keep fewer than an evaluated
    k, their metrics at that k count results they never return: they lose by construction. One line per top_k."""
    top_ks = {c.experiment.retrieval.top_k for c in configs}
    if len(top_ks) < 2:
        return []
    most = max(top_ks)
    lines = []
    for top_k in sorted(top_ks):
        short = [c for c in configs if c.experiment.retrieval.top_k == top_k
                 and any(k > top_k for k in c.experiment.evaluation.k)]
        if not short:
            continue
        ks = sorted({k for c in short for k in c.experiment.evaluation.k if k > top_k})
        at = ", ".join(f"@{k}" for k in ks)
        names = ", ".join(c.label for c in short[:3]) + (f" and {len(short) - 3} more" if len(short) > 3 else "")
        lines.append(f"retrieval.top_k {top_k} is below evaluation.k {ks} in {len(short)} configs ({names}): they "
                     f"return at most {top_k} results, so their metrics {at} lose to top_k {most} by construction; "
                     f"keep top_k >= {max(ks)} in the grid, or evaluate at k <= {top_k}")
    return lines


def load_sweep(path: str | Path, overrides: list[str] | None = None) -> SweepPlan:
    """Read a sweep config from YAML, apply ``a.b=value`` overrides to the baseline, expand it."""
    data = apply_set_items(read_yaml_mapping(path, example="configs/sweeps/demo.yaml"), overrides)
    plan = expand_sweep(data, str(path))
    plan.command = " ".join([str(path), *(f"--set {shlex.quote(item)}" for item in overrides or [])])
    return plan
