"""Numbers in configs: NaN, infinities and booleans are refused on every knob, extreme values never crash.

``KNOBS`` is every int or float knob of every section and strategy (tests/reliability/knobs.py), so the
properties hold for the knobs of tomorrow too.
"""
from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbench.config import ConfigError, load_experiment
from tests.reliability.inputs import assert_nothing_written, config, error_lines, make_beir, run_kbench, write_yaml
from tests.reliability.knobs import BASE, KNOBS

NON_FINITE = st.sampled_from([math.nan, math.inf, -math.inf, "nan", "-inf", "Infinity"])
PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def refusal(data: dict) -> str:
    with pytest.raises(ConfigError) as info:
        load_experiment(data)
    return str(info.value)


def test_the_knob_list_covers_every_section_and_strategy_kind():
    paths = {k.path for k in KNOBS}
    assert {"dataset.max_queries", "retrieval.leg_params.vector.similarity_threshold", "retrieval.fusion.weights",
            "retrieval.fusion.k", "retrieval.grouping.boost_per_chunk", "evaluation.overlap.value", "evaluation.k",
            "chunking.break_threshold", "rerank.temperature", "store.hnsw_m"} <= paths
    assert len(KNOBS) >= 60


@PROPERTY
@given(knob=st.sampled_from(KNOBS), value=NON_FINITE)
def test_non_finite_numbers_are_refused_on_every_knob(knob, value):
    if knob.kind is int and isinstance(value, str):
        value = float(value)  # an int knob refuses the string "nan" as not an integer anyway
    message = refusal(knob.config(value))
    (line,) = [ln for ln in message.splitlines() if ln.startswith("  - ")]  # one problem, one line
    assert knob.error_path in line, (knob, message)
    assert "finite" in line or "integer" in line, message


@PROPERTY
@given(knob=st.sampled_from(KNOBS), value=st.booleans())
def test_a_boolean_where_a_number_belongs_is_refused(knob, value):
    message = refusal(knob.config(value))
    assert f"{knob.error_path}: a boolean where a number belongs (got {value})" in message, message


@PROPERTY
@given(knob=st.sampled_from(KNOBS),
       value=st.one_of(st.integers(min_value=-10**30, max_value=10**30),
                       st.floats(allow_nan=False, allow_infinity=False),
                       st.sampled_from([0, -1, 2**63, -2**63, 1e308, -1e308, 5e-324, -0.0])))
def test_extreme_finite_numbers_validate_or_fail_with_the_knob_named(knob, value):
    data = knob.config(value)
    try:
        experiment = load_experiment(data)
    except ConfigError as e:
        section, name = knob.path.split(".")[0], knob.path.rsplit(".", 1)[-1]
        assert f"{section}" in str(e) and name in str(e), (knob, str(e))  # e.g. "chunking: chunk_overlap (...)"
        return
    json.dumps(experiment.resolved(), allow_nan=False)  # what is saved with the run is plain finite JSON
    default = load_experiment({**BASE, **knob.base})
    # A knob the run key hashes (run_key_payload: everything but names, tracking, LLM retry policy, data
    # guards and inactive sections, which cannot change a result) changes the run key when its value changes.
    node, default_node = experiment.run_key_payload(), default.run_key_payload()
    for part in knob.path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
        default_node = default_node.get(part) if isinstance(default_node, dict) else None
    if node is not None and node != default_node:
        assert experiment.run_key() != default.run_key(), knob


@pytest.mark.parametrize("sections, fragment", [
    ({"retrieval": {"leg_params": {"vector": {"similarity_threshold": math.nan}}}},
     "retrieval.leg_params.vector.similarity_threshold: not a finite number (got nan)"),
    ({"retrieval": {"legs": ["vector", "bm25"], "fusion": {"strategy": "rrf", "weights": {"bm25": math.nan}}}},
     "retrieval.fusion.weights.bm25: not a finite number (got nan)"),
    ({"retrieval": {"grouping": {"enabled": True, "boost_per_chunk": math.inf}}},
     "retrieval.grouping.boost_per_chunk: not a finite number (got inf)"),
    ({"dataset": {"name": "demo", "max_queries": True}}, "dataset.max_queries: a boolean where a number belongs"),
    ({"evaluation": {"k": [1, True]}}, "evaluation.k[1]: a boolean where a number belongs"),
    ({"retrieval": {"filters": {"metadata": {"score": -math.inf}}}},
     "retrieval.filters.metadata.score: not a finite number"),
    ({"sweep": {"retrieval.leg_params.vector.similarity_threshold": [0.1, math.nan]}},
     "sweep.retrieval.leg_params.vector.similarity_threshold[1]: not a finite number"),
])
def test_named_cases_from_the_issue(sections, fragment):
    assert fragment in refusal({**BASE, **sections})


def test_nan_threshold_no_longer_aliases_the_no_threshold_run_key():
    """Before: .nan passed, was saved as null and got the run key of the config without a threshold."""
    none = load_experiment({**BASE, "retrieval": {"leg_params": {"vector": {"similarity_threshold": None}}}})
    assert none.resolved()["retrieval"]["leg_params"]["vector"]["similarity_threshold"] is None
    refusal({**BASE, "retrieval": {"leg_params": {"vector": {"similarity_threshold": math.nan}}}})


def test_assignment_is_checked_like_loading():
    experiment = load_experiment(BASE)
    with pytest.raises(ValueError, match="finite"):
        experiment.retrieval.grouping.boost_per_chunk = math.nan
    with pytest.raises(ValueError, match="boolean"):
        experiment.retrieval.top_k = True


@pytest.mark.parametrize("yaml_value, fragment", [
    ("similarity_threshold: .nan", "retrieval.leg_params.vector.similarity_threshold: not a finite number"),
    ("similarity_threshold: -.inf", "retrieval.leg_params.vector.similarity_threshold: not a finite number"),
])
def test_cli_refuses_yaml_nan_and_infinity_before_any_work(tmp_path, yaml_value, fragment):
    workspace = tmp_path / "ws"
    path = write_yaml(tmp_path / "c.yaml", config(workspace, {"path": str(make_beir(tmp_path / "beir"))}))
    text = path.read_text().replace("legs:\n  - bm25", "legs:\n  - vector\n  leg_params:\n    vector:\n      "
                                    + yaml_value)
    path.write_text(text)
    done = run_kbench("run", str(path), "--quiet", cwd=tmp_path)
    assert done.code == 2, done.err
    (line,) = error_lines(done.err)
    assert fragment in done.err and str(path) in line
    assert_nothing_written(workspace)


def test_cli_refuses_a_boolean_count_and_a_nan_override(tmp_path):
    workspace = tmp_path / "ws"
    path = write_yaml(tmp_path / "c.yaml", config(workspace, {"path": str(make_beir(tmp_path / "beir"))}))
    done = run_kbench("run", str(path), "--set", "dataset.max_queries=true", "--quiet", cwd=tmp_path)
    assert done.code == 2 and "dataset.max_queries: a boolean where a number belongs (got True)" in done.err
    done = run_kbench("run", str(path), "--set", "retrieval.leg_params.bm25.k1=.nan", "--quiet", cwd=tmp_path)
    assert done.code == 2 and "retrieval.leg_params.bm25.k1: not a finite number (got nan)" in done.err
    assert_nothing_written(workspace)
