"""Config validation: every section rejects unknown keys and bad values with the path, value and choices."""
from __future__ import annotations

from pathlib import Path

import pytest

from kbench.config import ConfigError, load_experiment, parse_override
from kbench.errors import KbenchNote
from kbench.paths import REPO_ROOT

BASE = {"dataset": {"name": "demo"}}


def error_for(**sections) -> str:
    with pytest.raises(ConfigError) as info:
        load_experiment({**BASE, **sections})
    return str(info.value)


@pytest.mark.parametrize(
    "sections, expected",
    [
        ({"dataset": {"name": "demo", "splt": "test"}}, ["dataset.splt", "unknown key", "split"]),
        ({"dataset": {}}, ["dataset", "either 'name'", "'path'"]),
        ({"dataset": {"name": "demo", "max_queries": 0}}, ["dataset.max_queries", "0"]),
        ({"chunking": {"strategy": "semantic-magic"}}, ["chunking.strategy", "'semantic-magic'", "allowed:", "fixed"]),
        ({"chunking": {"strategy": "fixed", "chunk_sze": 10}}, ["chunking.chunk_sze", "unknown key", "chunk_size"]),
        ({"chunking": {"strategy": "fixed", "chunk_size": 100, "chunk_overlap": 100}},
         ["chunk_overlap (100) must be smaller than chunk_size (100)"]),
        ({"embedding": {"provider": "cohere"}}, ["embedding.provider", "'cohere'", "sentence_transformers", "openai"]),
        ({"embedding": {"batch_size": 0}}, ["embedding.batch_size", "0"]),
        ({"store": {"index": "annoy"}}, ["store.index", "'annoy'", "'flat'", "'hnsw'", "'ivf'"]),
        ({"retrieval": {"legs": ["vectr"]}}, ["retrieval.legs", "'vectr'", "vector"]),
        ({"retrieval": {"fusion": {"strategy": "magic"}}}, ["retrieval.fusion.strategy", "'magic'", "none"]),
        ({"retrieval": {"top_k": -1}}, ["retrieval.top_k", "-1"]),
        ({"rerank": {"enabled": True, "strategy": "oracle"}}, ["rerank.strategy", "'oracle'"]),
        ({"evaluation": {"k": [0, 10]}}, ["evaluation.k", "k must be >= 1"]),
        ({"evaluation": {"overlap": {"rule": "most"}}}, ["evaluation.overlap.rule", "'most'", "'min_chars'"]),
        ({"tracking": {"uri": "x"}}, ["tracking.uri", "unknown key", "tracking_uri"]),
        ({"enrichment": {"enabled": "perhaps"}}, ["enrichment.enabled", "'perhaps'"]),
        ({"colour": "blue"}, ["colour", "unknown key", "chunking"]),
        # a knob of another strategy: whose it is; a strategy with no knobs says so (not "allowed keys:" and nothing)
        ({"chunking": {"strategy": "smart", "chunk_overlap": 100}},
         ["chunking.chunk_overlap: unknown key for chunking.strategy smart, whose knobs are chunk_size, "
          "break_threshold, merge_below (chunk_overlap is a knob of fixed, fixed_tokens, markdown, recursive)"]),
        ({"retrieval": {"fusion": {"strategy": "none", "k": 60}}},
         ["retrieval.fusion.k: retrieval.fusion.strategy none takes no knobs (k is a knob of rrf)"]),
    ],
)
def test_bad_config_names_field_value_and_choices(sections, expected):
    message = error_for(**sections)
    for fragment in expected:
        assert fragment in message, (fragment, message)


def test_defaults_are_filled_in_resolved_config():
    experiment = load_experiment({**BASE, "chunking": {"strategy": "fixed"}})
    resolved = experiment.resolved()
    assert resolved["chunking"] == {"strategy": "fixed", "chunk_size": 1000, "chunk_overlap": 200}
    assert resolved["retrieval"]["leg_params"] == {"vector": {"similarity_threshold": None}}
    assert resolved["embedding"]["model"] == "all-MiniLM-L6-v2"


def test_overrides_parse_yaml_values_and_nested_paths(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("dataset: {name: demo}\nchunking: {strategy: fixed}\n")
    experiment = load_experiment(path, ["chunking.chunk_size=300", "chunking.chunk_overlap=50",
                                        "evaluation.k=[1,2]", "retrieval.filters.doc_types=[code]"])
    assert experiment.chunking.params.chunk_size == 300
    assert experiment.evaluation.k == [1, 2]
    assert experiment.retrieval.filters.doc_types == ["code"]
    assert parse_override("tracking.run_name=abc") == ("tracking.run_name", "abc")
    with pytest.raises(ConfigError, match="expected section.key=value"):
        parse_override("chunking.chunk_size")


def test_run_key_ignores_names_and_tracking_but_not_knobs():
    a = load_experiment({**BASE, "name": "a", "tracking": {"experiment": "x"}})
    b = load_experiment({**BASE, "name": "b", "tracking": {"experiment": "y"}})
    c = load_experiment({**BASE, "name": "a", "chunking": {"strategy": "fixed", "chunk_size": 999}})
    assert a.run_key() == b.run_key() != c.run_key()


def test_yaml_errors_are_reported_with_the_file(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("dataset: {name: demo\n")
    with pytest.raises(ConfigError, match="broken.yaml: not valid YAML"):
        load_experiment(path)
    path.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_experiment(path)
    with pytest.raises(ConfigError, match="config file not found"):
        load_experiment(tmp_path / "nope.yaml")


def test_renamed_keys_still_work_say_their_new_name_and_keep_the_run_key(recwarn):
    from kbench.errors import KbenchDeprecationWarning

    new = load_experiment({"dataset": {"name": "demo"}, "retrieval": {"legs": ["vector", "bm25"],
                                                                      "fusion": {"strategy": "rrf", "k": 30}},
                           "rerank": {"strategy": "llm"}})
    old = load_experiment({"dataset": {"name": "demo"}, "retrieval": {"legs": ["vector", "bm25"],
                                                                      "fusion": {"method": "rrf", "k": 30}},
                           "rerank": {"method": "llm"}})
    assert old.resolved() == new.resolved() and old.run_key() == new.run_key()
    assert old.retrieval.fusion.strategy == "rrf" and old.rerank.strategy == "llm"
    said = {str(w.message) for w in recwarn if issubclass(w.category, KbenchDeprecationWarning)}
    assert any("retrieval.fusion.method is now retrieval.fusion.strategy" in s for s in said)
    # the run key hashes the old spelling, so runs logged before the rename are found again
    assert new.run_key_payload()["retrieval"]["fusion"]["method"] == "rrf"
    by_set = load_experiment({"dataset": {"name": "demo"}, "retrieval": {"legs": ["vector", "bm25"],
                                                                         "fusion": {"strategy": "weighted"}}},
                             ["retrieval.fusion.method=rrf", "retrieval.fusion.k=30", "rerank.method=llm"])
    assert by_set.run_key() == new.run_key()  # an old dotted path in --set replaces the new key
    with pytest.raises(ConfigError, match="retrieval.fusion.method .* and retrieval.fusion.strategy .* are one"):
        load_experiment({"dataset": {"name": "demo"}, "retrieval": {"fusion": {"method": "rrf",
                                                                               "strategy": "weighted"}}})


def test_a_strategy_switched_by_set_leaves_the_old_strategys_knobs_out_and_says_so(tmp_path):
    """`--set chunking.strategy=smart` on the quickstart config (fixed, with chunk_overlap) runs smart, as a sweep
    variant does; the knobs left out are named on stderr, and a knob no strategy has is still an error."""
    quickstart = Path(__file__).resolve().parents[1] / "configs" / "quickstart.yaml"
    with pytest.warns(KbenchNote, match=r"--set chunking.strategy=smart: left out chunk_overlap, knobs of another "
                                        r"strategy \(`kbench list chunkers`"):
        experiment = load_experiment(quickstart, ["chunking.strategy=smart", "chunking.chunk_size=400"])
    assert experiment.resolved()["chunking"] == {"strategy": "smart", "chunk_size": 400, "break_threshold": 0.3,
                                                 "merge_below": 200}
    with pytest.warns(KbenchNote, match="left out k, weights"):
        fused = load_experiment(Path(quickstart).parent / "retrieval" / "rrf.yaml",
                                ["retrieval.fusion.strategy=none", "retrieval.legs=[vector]"])
    assert fused.resolved()["retrieval"]["fusion"] == {"strategy": "none"}
    with pytest.warns(KbenchNote), pytest.raises(ConfigError, match="chunk_sze: unknown key for chunking.strategy"):
        load_experiment(quickstart, ["chunking.strategy=smart", "chunking.chunk_sze=400"])


def test_an_unknown_key_message_always_lists_keys():
    """An unknown knob is refused with the keys the strategy takes, never an empty list."""
    with pytest.raises(ConfigError, match="retrieval.fusion.kk: unknown key for retrieval.fusion.strategy rrf, whose "
                                          "knobs are k, weights"):
        load_experiment(REPO_ROOT / "configs/retrieval/rrf.yaml", ["retrieval.fusion.kk=3"])
    with pytest.raises(ConfigError, match="rerank.foo: unknown key for rerank.strategy cross_encoder, whose knobs "
                                          "are candidate_multiplier"):
        load_experiment(REPO_ROOT / "configs/retrieval/rrf.yaml", ["rerank.enabled=true", "rerank.foo=1"])


def test_a_written_config_runs_the_same_from_another_folder(tmp_path, monkeypatch):
    """issue 42 item 11: a sweep's winner.yaml named `dataset.path: sets/docs` and `workspace: experiments`,
    relative to where the sweep ran; written portable, its paths are absolute and its workspace the one used."""
    import yaml as _yaml

    from kbench.config import load_experiment

    (tmp_path / "here" / "sets" / "docs").mkdir(parents=True)
    (tmp_path / "here" / "sets" / "docs" / "guide.md").write_text("# Guide\n\nRetries back off.\n")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    monkeypatch.setenv("KBENCH_WORKSPACE", str(tmp_path / "used"))
    experiment = load_experiment({"name": "w", "dataset": {"path": "sets/docs"}, "workspace": "experiments"})
    portable, key = experiment.portable(), experiment.run_key()
    assert portable["dataset"]["path"] == str(tmp_path / "here" / "sets" / "docs")
    assert portable["workspace"] == str(tmp_path / "used")
    assert portable["embedding"]["model"] == "all-MiniLM-L6-v2"  # a catalogue name stays a name
    written = tmp_path / "here" / "winner.yaml"
    written.write_text(_yaml.safe_dump(portable), encoding="utf-8")
    monkeypatch.chdir(tmp_path / "elsewhere")
    monkeypatch.delenv("KBENCH_WORKSPACE")
    again = load_experiment(written)
    assert Path(again.dataset.path).is_dir() and again.workspace == str(tmp_path / "used")
    # the same folder, named absolute instead of relative: the same results, so the same run key (the sweep's
    # finished child is reused when winner.yaml runs); another folder's content is another key
    assert again.run_key() == key
    (tmp_path / "here" / "sets" / "docs" / "guide.md").write_text("# Guide\n\nRetries do not back off.\n")
    assert load_experiment(written).run_key() != key
