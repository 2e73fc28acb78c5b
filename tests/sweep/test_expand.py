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


# --------------------------------------------------------------------------- a section value replaces the section
CHUNKERS = [{"strategy": "fixed", "chunk_size": 600, "chunk_overlap": 100}, {"strategy": "recursive"},
            {"strategy": "markdown"}]


def chunker_sweep(**blocks) -> dict:
    return {"name": "chunkers", "dataset": {"name": "demo"},
            "chunking": {"strategy": "fixed", "chunk_size": 600, "chunk_overlap": 100}, **blocks}


def test_a_section_valued_grid_runs_each_strategy_with_its_own_defaults():
    """The trap: ``chunking: [{...600/100}, {strategy: recursive}, {strategy: markdown}]`` ran markdown and
    recursive at 600/100 (merged into the baseline's section) while saying 'recursive' and 'markdown'."""
    plan = expand_sweep(chunker_sweep(sweep={"chunking": CHUNKERS}), "<test>")
    by = {c.experiment.chunking.strategy: c.experiment.chunking.model_dump() for c in plan.configs}
    assert by["fixed"] == {"strategy": "fixed", "chunk_size": 600, "chunk_overlap": 100}
    assert (by["recursive"]["chunk_size"], by["recursive"]["chunk_overlap"]) == (1000, 200)  # RecursiveParams
    assert (by["markdown"]["chunk_size"], by["markdown"]["chunk_overlap"]) == (2000, 200)  # MarkdownParams
    assert [c.label for c in plan.configs] == ["chunking=fixed", "chunking=recursive", "chunking=markdown"]
    assert plan.legend["chunking=markdown"] == '{"strategy": "markdown"}'
    # a variant written as a mapping replaces the section too
    variants = expand_sweep(chunker_sweep(variants=[{"name": "md", "chunking": {"strategy": "markdown"}}]), "<t>")
    assert variants.by_label()["md"].experiment.chunking.chunk_size == 2000


def test_a_dotted_strategy_override_keeps_the_knobs_strategies_share():
    plan = expand_sweep(chunker_sweep(sweep={"chunking.strategy": ["recursive", "markdown", "none"]}), "<test>")
    by = {c.experiment.chunking.strategy: c.experiment.chunking.model_dump() for c in plan.configs}
    assert (by["recursive"]["chunk_size"], by["recursive"]["chunk_overlap"]) == (600, 100)
    assert (by["markdown"]["chunk_size"], by["markdown"]["chunk_overlap"]) == (600, 100)
    assert by["none"] == {"strategy": "none"}  # knobs it lacks are dropped
    # a dotted knob crossed with a section axis: the section's strategy decides which knobs apply
    crossed = expand_sweep(chunker_sweep(sweep={"chunking": [{"strategy": "none"}, {"strategy": "recursive"}],
                                                "chunking.chunk_size": [300]}), "<test>")
    assert [c.experiment.chunking.model_dump().get("chunk_size") for c in crossed.configs] == [None, 300]


def test_labels_stay_short_and_unique_with_a_legend():
    plan = expand_sweep(chunker_sweep(sweep={
        "chunking": [{"strategy": "fixed", "chunk_size": 300, "chunk_overlap": 0},
                     {"strategy": "fixed", "chunk_size": 900, "chunk_overlap": 0}],
        "retrieval.leg_params": [{"bm25": {"k1": 0.9, "b": 0.4}}, {"bm25": {"k1": 1.2, "b": 0.75}}]},
        retrieval={"legs": ["bm25"]}), "<test>")
    labels = [c.label for c in plan.configs]
    assert labels == ["chunking=fixed-1,leg_params#1", "chunking=fixed-1,leg_params#2",
                      "chunking=fixed-2,leg_params#1", "chunking=fixed-2,leg_params#2"]
    assert max(map(len, labels)) < 40 and len(set(labels)) == 4
    assert plan.legend["leg_params#2"] == '{"bm25": {"k1": 1.2, "b": 0.75}}'
    assert plan.legend["chunking=fixed-2"] == '{"strategy": "fixed", "chunk_size": 900, "chunk_overlap": 0}'


def test_the_knob_table_shows_every_resolved_knob_that_differs():
    from kbench.sweep.summary import knob_table, plan_knob_table, short_headers

    plan = expand_sweep(chunker_sweep(sweep={"chunking": CHUNKERS, "retrieval.top_k": [10, 20]}), "<test>")
    table = plan_knob_table(plan)
    assert {"chunking.strategy", "chunking.chunk_size", "chunking.chunk_overlap", "retrieval.top_k"} <= set(table.paths)
    assert "embedding.model" not in table.paths  # the same everywhere: not shown
    md = table.of("chunking=markdown,top_k=20")
    assert md["chunking.chunk_size"] == "2000" and md["retrieval.top_k"] == "20"
    assert table.of("chunking=fixed,top_k=10")["chunking.max_depth"] == "-"  # fixed has no such knob
    assert table.legend["chunk_size"] == "chunking.chunk_size"
    assert short_headers(["retrieval.fusion.k", "retrieval.leg_params.bm25.k", "chunking.chunk_size"]) == [
        "fusion.k", "bm25.k", "chunk_size"]
    assert knob_table([("a", {"x": "1"}), ("b", {"x": "1"})]).paths == []


def test_dry_run_prints_the_resolved_knobs_and_the_legend(tmp_path, capsys):
    import yaml

    from kbench.cli import main

    config = tmp_path / "sweep.yaml"
    config.write_text(yaml.safe_dump(chunker_sweep(sweep={"chunking": CHUNKERS})))
    assert main(["sweep", str(config), "--dry-run"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()  # the table wraps to the terminal: read the block that holds chunk_size
    start = next(i for i, line in enumerate(lines) if line.startswith("config ") and " chunk_size " in line)
    at = lines[start].index(" chunk_size ") + 1
    rows = {line.split()[0]: line for line in lines[start + 2:start + 5]}
    assert [rows[f"chunking={s}"][at:].split()[0] for s in ("fixed", "recursive", "markdown")] == [
        "600", "1000", "2000"]
    assert "columns: strategy = chunking.strategy; chunk_size = chunking.chunk_size" in out
    assert 'label chunking=recursive = {"strategy": "recursive"}' in out


def test_a_grid_over_the_question_set_is_refused_before_anything_runs():
    """Issue 45: a grid with a dataset.seed axis ran every config, then said "no config finished" (exit 0, no
    effects): configs on different samples share no questions to pair. Refused up front, naming the knob; an axis
    that keeps the questions (the seed without a sample) still expands."""
    import pytest

    from kbench.config import ConfigError

    base = {"name": "s", "dataset": {"name": "demo", "max_queries": 6}, "retrieval": {"legs": ["bm25"]}}
    with pytest.raises(ConfigError, match=r"different question sets \(dataset.seed differs between them\); .* "
                                          r"--set dataset.seed=\.\.\."):
        expand_sweep({**base, "sweep": {"dataset.seed": [0, 1]}})
    with pytest.raises(ConfigError, match=r"dataset.max_queries, dataset.seed differ"):
        expand_sweep({**base, "variants": [{"name": "a", "dataset.seed": 1, "dataset.max_queries": 8}]})
    unsampled = {**base, "dataset": {"name": "demo"}, "sweep": {"dataset.seed": [0, 1]}}
    assert len(expand_sweep(unsampled).configs) == 2
