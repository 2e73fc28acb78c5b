"""Search types of the GWI spec as retrieval presets: ``retrieval: {preset: code}``.

A preset fills the retrieval settings its pipeline names; anything the config sets itself wins (a deep
merge, so ``filters`` given beside a preset add to the preset's filters). The resolved config records the
expanded values, so a run shows exactly what the preset meant.

The GWI spec's pipelines and what each step becomes here:
- ``semantic``: embed_query, knn_search(k=20), rerank(top_k=5) -> 20 candidates per leg, top_k 5.
- ``code``: knn_search(k=30, filter: type=code), rerank(top_k=10) -> doc_types [code], 30 candidates, top_k 10.
- ``similar``: embed_code_snippet, knn_search(k=20, filter: type=code), exclude_same_file, rerank(top_k=5)
  -> the query text is the snippet; doc_types [code], 20 candidates, results from the query's own document
  (query metadata ``doc_id``) dropped after the first stage, top_k 5.
- ``historical``: knn_search(k=50, filter: type IN [pr, commit]), filter_by_relevance, rerank(top_k=10)
  -> doc_types [pr, commit], 50 candidates, top_k 10. The GWI spec gives no rule for filter_by_relevance: not applied.
The rerank step runs when the config's ``rerank.enabled`` is true (a preset never turns on a model that
may not be installed); without it the first ``top_k`` of the candidates are kept. The GWI spec's later steps
(expand_with_dependencies, assemble_context) build prompts, outside retrieval.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    settings: dict[str, Any] = field(default_factory=dict)  # retrieval section keys


PRESETS: dict[str, Preset] = {p.name: p for p in [
    Preset("semantic", "natural-language search across all content (k=20 -> 5)",
           {"legs": ["vector"], "candidates_per_leg": 20, "top_k": 5}),
    Preset("code", "find code by functionality: type=code (k=30 -> 10)",
           {"legs": ["vector"], "candidates_per_leg": 30, "top_k": 10, "filters": {"doc_types": ["code"]}}),
    Preset("similar", "code like a given snippet, excluding the snippet's own file (k=20 -> 5)",
           {"legs": ["vector"], "candidates_per_leg": 20, "top_k": 5,
            "filters": {"doc_types": ["code"], "exclude_query_document": True}}),
    Preset("historical", "past changes: type in (pr, commit) (k=50 -> 10)",
           {"legs": ["vector"], "candidates_per_leg": 50, "top_k": 10,
            "filters": {"doc_types": ["pr", "commit"]}}),
]}


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``override`` on top; nested dicts merge, everything else is replaced."""
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def expand_preset(retrieval: dict[str, Any]) -> dict[str, Any]:
    """The retrieval section with its preset's settings under the section's own values."""
    name = retrieval.get("preset")
    if name not in PRESETS:
        raise ValueError(f"retrieval.preset: unknown preset {name!r}; allowed: {', '.join(PRESETS)}")
    return deep_merge(PRESETS[name].settings, retrieval)
