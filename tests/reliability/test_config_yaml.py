"""Config files: duplicate keys, alias bombs, deep nesting, bad bytes; each one line naming file and line."""
from __future__ import annotations

import time

import pytest

from kbench.config import ConfigError, load_experiment, parse_override
from tests.reliability.inputs import assert_nothing_written, error_lines, run_kbench

GOOD = "dataset: {name: demo}\n"

BOMB = "".join([
    'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n',
    *(f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi")),
    GOOD,
])


def refusal(tmp_path, text: str | bytes, name: str = "c.yaml") -> str:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    with pytest.raises(ConfigError) as info:
        load_experiment(path)
    return str(info.value)


@pytest.mark.parametrize("text, fragment", [
    (GOOD + "chunking:\n  strategy: fixed\n  chunk_size: 300\n  chunk_size: 400\n",
     "c.yaml:5: duplicate key 'chunk_size' (first at line 4); keep one of them"),
    (GOOD + "name: a\nname: b\n", "c.yaml:3: duplicate key 'name' (first at line 2)"),
    ("dataset: {name: demo, name: scifact}\n", "c.yaml:1: duplicate key 'name' (first at line 1)"),
    (GOOD + "retrieval:\n  legs: [vector]\nretrieval:\n  top_k: 5\n", "c.yaml:4: duplicate key 'retrieval'"),
])
def test_duplicate_keys_are_refused_with_both_lines(tmp_path, text, fragment):
    assert fragment in refusal(tmp_path, text)


def test_merge_keys_may_be_overridden_they_are_not_duplicates(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(GOOD + "chunking:\n  <<: {strategy: fixed, chunk_size: 300, chunk_overlap: 10}\n"
                    "  chunk_size: 400\n")
    chunking = load_experiment(path).chunking
    assert (chunking.strategy, chunking.params.chunk_size, chunking.params.chunk_overlap) == ("fixed", 400, 10)


def test_an_alias_bomb_fails_fast_with_a_short_message(tmp_path):
    started = time.perf_counter()
    message = refusal(tmp_path, BOMB)
    assert time.perf_counter() - started < 10
    assert "c.yaml:" in message and "aliases expand to more than 100,000 values" in message
    assert len(message) < 400


def test_a_recursive_alias_and_deep_nesting_are_refused(tmp_path):
    assert "recursive structure" in refusal(tmp_path, "a: &a [1, *a]\n" + GOOD)
    assert "nested more than 50 levels deep" in refusal(tmp_path, "x: " + "[" * 60 + "]" * 60 + "\n" + GOOD)
    assert "nested too deeply" in refusal(tmp_path, "x: " + "[" * 5000 + "]" * 5000 + "\n" + GOOD)


def test_bad_bytes_and_oversized_files(tmp_path):
    assert "c.yaml:2: not UTF-8 (byte" in refusal(tmp_path, b"dataset: {name: demo}\nname: caf\xe9\n")
    assert "too large for a config" in refusal(tmp_path, GOOD + "# " + "x" * (6 * 1024 * 1024) + "\n")


def test_a_huge_bad_value_is_echoed_short(tmp_path):
    message = refusal(tmp_path, GOOD + "evaluation: {k: [" + ", ".join(["ten"] * 50_000) + "]}\n")
    assert "evaluation.k.0" in message and "... and 49980 more problems like these" in message
    assert len(message.splitlines()) == 22 and len(message) < 4_000
    message = refusal(tmp_path, GOOD + "chunking: {strategy: " + "x" * 100_000 + "}\n")
    assert "chunking.strategy" in message and len(message) < 2_000


def test_overrides_refuse_duplicates_and_bombs_but_keep_plain_strings():
    with pytest.raises(ConfigError, match="duplicate key 'a'"):
        parse_override("retrieval.filters.metadata={a: 1, a: 2}")
    assert parse_override("tracking.run_name=a: b: c") == ("tracking.run_name", "a: b: c")  # not YAML: a string


def test_cli_alias_bomb_exits_2_in_seconds_and_writes_nothing(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB.replace(GOOD, GOOD + f"workspace: {tmp_path / 'ws'}\n"))
    started = time.perf_counter()
    done = run_kbench("run", str(path), "--quiet", cwd=tmp_path, timeout=120)
    assert done.code == 2 and time.perf_counter() - started < 60
    (line,) = error_lines(done.err)
    assert f"{path}:" in line and "alias bomb" in line and len(done.err) < 2_000
    assert not (tmp_path / "ws").exists()


def test_cli_duplicate_key_exits_2(tmp_path):
    workspace = tmp_path / "ws"
    path = tmp_path / "dup.yaml"
    path.write_text(f"workspace: {workspace}\n{GOOD}retrieval:\n  top_k: 5\n  top_k: 50\n")
    done = run_kbench("run", str(path), "--quiet", cwd=tmp_path)
    assert done.code == 2
    (line,) = error_lines(done.err)
    assert line == f"kbench: error: {path}:5: duplicate key 'top_k' (first at line 4); keep one of them"
    assert_nothing_written(workspace)
