"""The settings reference is generated from the config models and current; every knob documents itself; `kbench list`
prints each registry; every command a message names exists."""
from __future__ import annotations

import ast
import importlib.util
import re

import pytest

from kbench.cli import build_parser, main
from kbench.cli.list_cmd import TOPICS
from kbench.cli.reference import every_knob, render_all
from kbench.paths import REPO_ROOT


def _tool():
    spec = importlib.util.spec_from_file_location("settings_reference", REPO_ROOT / "tools" / "settings_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_checked_in_settings_pages_are_what_the_code_gives():
    stale = _tool().stale_pages()
    assert not stale, f"run `python tools/settings_reference.py` and commit docs/settings/: {stale}"


def test_the_check_fails_on_a_stale_page(tmp_path):
    tool = _tool()
    for name, text in render_all().items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    assert tool.stale_pages(tmp_path) == []
    (tmp_path / "chunking.md").write_text("# chunking\n", encoding="utf-8")
    (tmp_path / "gone.md").write_text("# a section that no longer exists\n", encoding="utf-8")
    assert tool.stale_pages(tmp_path) == ["chunking.md", "gone.md"]


def test_every_knob_has_a_type_a_default_and_a_description():
    knobs = every_knob()
    assert len(knobs) > 200
    missing = [k.path for k in knobs if not k.description]
    assert not missing, f"give these a Field(description=...): {missing}"
    assert all(k.type and k.default for k in knobs)
    by_path = {k.path: k for k in knobs}
    assert by_path["chunking.strategy"].allowed.startswith("ast, by_type")
    assert by_path["retrieval.top_k"].unit == "results" and by_path["retrieval.top_k"].allowed == ">= 1"
    assert by_path["llm.policy.timeout_s"].unit == "seconds"  # from the name's suffix
    assert by_path["evaluation.overlap.rule"].allowed == "any, min_chars, min_fraction"


def test_one_page_per_stage_with_its_strategies():
    pages = render_all()
    assert {"index.md", "dataset.md", "chunking.md", "embedding.md", "store.md", "retrieval.md", "rerank.md",
            "evaluation.md", "tracking.md"} <= set(pages)
    assert "## smart" in pages["chunking.md"] and "`chunking.strategy: smart`" in pages["chunking.md"]
    assert "### bm25" in pages["retrieval.md"] and "| `k1` | float | `1.2` |" in pages["retrieval.md"]
    assert "`rerank.strategy: cross_encoder`" in pages["rerank.md"]


@pytest.mark.parametrize("topic", TOPICS)
def test_kbench_list_prints_every_registry(topic, capsys):
    assert main(["list", topic]) == 0
    out = capsys.readouterr().out
    expected = {"chunkers": "chunk_overlap", "legs": "k1", "fusions": "rrf_supabase", "normalizations": "min-max",
                "rerankers": "candidate_multiplier", "models": "all-MiniLM-L6-v2", "metrics": "ndcg",
                "datasets": "scifact", "notebooks": "00_quickstart", "units": "heading"}[topic]
    assert expected in out


def test_kbench_list_without_a_topic_names_every_registry(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert all(line.split(" (")[0] in TOPICS for line in out.splitlines()[:len(TOPICS)])


def test_an_unknown_topic_is_refused_with_the_topics(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["list", "fusion"])
    assert exit_.value.code == 2 and "fusions" in capsys.readouterr().err


# A command in a message: in backticks or parentheses ("run `kbench list fusions`", "(kbench datasets list)").
COMMAND = re.compile(r"[`(]kbench ([a-z][a-z-]*)(?: ([a-z][a-z0-9_-]*))?")


def _strings(path):
    """Every string literal but docstrings (prose may say "(kbench sets it ...)")."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if id(node) in docstrings:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value
        elif isinstance(node, ast.JoinedStr):
            yield "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)


def test_every_command_a_message_names_exists():
    commands = {}
    for action in build_parser()._subparsers._group_actions:
        for name, parser in action.choices.items():
            subs = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
            commands[name] = set(subs[0].choices) if subs else None
    wrong, checked = [], 0
    for path in sorted((REPO_ROOT / "kbench").rglob("*.py")):
        for text in _strings(path):
            for m in COMMAND.finditer(text):
                checked += 1
                command, sub = m.group(1), m.group(2)
                if command not in commands:
                    wrong.append(f"{path.relative_to(REPO_ROOT)}: kbench {command}")
                elif commands[command] is not None and sub and sub not in commands[command]:
                    wrong.append(f"{path.relative_to(REPO_ROOT)}: kbench {command} {sub}")
    assert checked > 30
    assert not wrong, wrong
