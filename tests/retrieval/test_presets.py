"""The GWI spec's search types as retrieval presets."""
from __future__ import annotations

import pytest

from kbench.config import ConfigError, load_experiment
from kbench.retrieval.presets import PRESETS


def experiment(tmp_path, **retrieval):
    return load_experiment({"dataset": {"name": "demo"}, "workspace": str(tmp_path), "retrieval": retrieval})


def test_code_preset_expands_to_gwi_spec_settings(tmp_path):
    r = experiment(tmp_path, preset="code").retrieval
    assert (r.candidates_per_leg, r.top_k, r.filters.doc_types) == (30, 10, ["code"])
    resolved = experiment(tmp_path, preset="code").resolved()["retrieval"]
    assert resolved["preset"] == "code" and resolved["filters"]["doc_types"] == ["code"]  # the run records both


@pytest.mark.parametrize("name, k, top, types", [("semantic", 20, 5, None), ("similar", 20, 5, ["code"]),
                                                  ("historical", 50, 10, ["pr", "commit"])])
def test_each_search_type(tmp_path, name, k, top, types):
    r = experiment(tmp_path, preset=name).retrieval
    assert (r.candidates_per_leg, r.top_k, r.filters.doc_types) == (k, top, types)
    assert r.filters.exclude_query_document is (name == "similar")


def test_config_values_win_and_filters_merge(tmp_path):
    r = experiment(tmp_path, preset="code", top_k=3, filters={"source_ids": ["sdk"]}).retrieval
    assert r.top_k == 3 and r.candidates_per_leg == 30
    assert r.filters.doc_types == ["code"] and r.filters.source_ids == ["sdk"]
    r = experiment(tmp_path, preset="code", filters={"doc_types": ["code", "openapi"]}).retrieval
    assert r.filters.doc_types == ["code", "openapi"]


def test_preset_with_other_legs_and_fusion(tmp_path):
    r = experiment(tmp_path, preset="code", legs=["vector", "bm25"], fusion={"strategy": "rrf"}).retrieval
    assert r.legs == ["vector", "bm25"] and r.filters.doc_types == ["code"]


def test_unknown_preset_lists_the_names(tmp_path):
    with pytest.raises(ConfigError) as e:
        experiment(tmp_path, preset="fuzzy")
    assert all(name in str(e.value) for name in PRESETS)
