"""Sweep expansion without running anything: names of the configs a sweep makes."""
from __future__ import annotations

from kbench.config import MAX_NAME_CHARS, name_problem
from kbench.sweep import expand_sweep


def test_long_variant_labels_make_valid_distinct_names_and_keep_the_run_keys():
    data = {"name": "long", "dataset": {"name": "demo"},
            "variants": [{"name": "v" * 600, "chunking": {"chunk_size": 300}},
                         {"name": "v" * 599 + "w", "chunking": {"chunk_size": 400}}]}
    plan = expand_sweep(data, "<test>")
    names = [c.experiment.name for c in plan.configs]
    assert names[0] == "long[baseline]"
    assert all(len(n) <= MAX_NAME_CHARS and name_problem(n) is None for n in names)
    assert len(set(names)) == 3  # the two cut names differ by the hash of their labels
    short = expand_sweep({**data, "variants": [{"name": "a", "chunking": {"chunk_size": 300}},
                                               {"name": "b", "chunking": {"chunk_size": 400}}]}, "<test>")
    assert [c.run_key for c in plan.configs] == [c.run_key for c in short.configs]  # names never reach run keys
