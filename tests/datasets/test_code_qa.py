"""The code-QA builder on real installed packages and on small sources in each tree-sitter language."""
from __future__ import annotations

import ast
import json
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import yaml
from kbench.cli import main as kbench_main
from kbench.config import DatasetConfig, load_experiment
from kbench.datasets import load_dataset
from kbench.datasets.code_qa import (CodeQAError, Edit, apply_edits, build_code_qa, documented_functions,
                                     first_sentence)

YAML_SRC = Path(yaml.__file__).parent  # PyYAML: a real package this team did not write
JSON_SRC = Path(json.__file__).parent  # the standard library's json package
UNDICI_SRC = Path("/usr/lib/node_modules/npm/node_modules/undici/lib")  # npm's bundled HTTP client


def read_questions(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "questions.jsonl").read_text(encoding="utf-8").splitlines()]


def strip_docstrings(tree: ast.AST) -> str:
    """The oracle: the original AST with each function's docstring removed (or replaced by pass)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and ast.get_docstring(node):
            node.body = node.body[1:] or [ast.Pass()]
    return ast.dump(tree)


def functions_by_qualname(tree: ast.AST) -> dict[str, ast.AST]:
    out: dict[str, ast.AST] = {}

    def visit(node, scope):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.setdefault(".".join(scope + [child.name]), child)
                visit(child, scope + [child.name, "<locals>"])
            elif isinstance(child, ast.ClassDef):
                visit(child, scope + [child.name])
            else:
                visit(child, scope)

    visit(tree, [])
    return out


@pytest.fixture(scope="module")
def yaml_set(tmp_path_factory):
    out = tmp_path_factory.mktemp("code-qa") / "yaml"
    return build_code_qa(YAML_SRC, out), out


def test_builds_questions_from_a_real_package(yaml_set):
    report, out = yaml_set
    questions = read_questions(out)
    assert report.questions == len(questions) >= 10
    assert report.files == len(list(YAML_SRC.glob("*.py")))
    assert report.documented_functions == report.questions + sum(report.dropped_questions.values())
    flat = {p.relative_to(out / "docs").as_posix(): " ".join(p.read_text(encoding="utf-8").split())
            for p in (out / "docs").rglob("*.py")}
    for q in questions:
        (ref,) = q["references"]
        copy = (out / "docs" / ref["doc_id"]).read_text(encoding="utf-8")
        function = copy[ref["start_index"]:ref["end_index"]]
        assert function == ref["content"]
        # the span is exactly one whole function (decorators included) in the indexed copy
        indent = copy[copy.rfind("\n", 0, ref["start_index"]) + 1:ref["start_index"]]
        assert not indent.strip()  # the span starts at the first character of its line's code
        (node,) = ast.parse(textwrap.dedent(indent + function)).body
        assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        assert node.name == q["symbol"].rsplit(".", 1)[-1]
        assert all(q["question"] not in text for text in flat.values())
        # the question is the first sentence of that function's docstring in the original file
        original = functions_by_qualname(ast.parse((YAML_SRC / ref["doc_id"]).read_text(encoding="utf-8")))
        assert q["question"] == first_sentence(ast.get_docstring(original[q["symbol"]]))


def test_indexed_copy_is_the_source_minus_function_docstrings(yaml_set):
    _, out = yaml_set
    for path in YAML_SRC.glob("*.py"):
        copy = (out / "docs" / path.name).read_text(encoding="utf-8")
        assert ast.dump(ast.parse(copy)) == strip_docstrings(ast.parse(path.read_text(encoding="utf-8")))


def test_the_loader_reads_it_and_checks_every_offset(yaml_set):
    report, out = yaml_set
    dataset = load_dataset(DatasetConfig(path=str(out)))
    assert len(dataset.queries) == report.questions
    assert {d.doc_type for d in dataset.documents} == {"code"}
    assert json.loads((out / "manifest.json").read_text())["questions"] == report.questions


# --------------------------------------------------------------------------- Python details
def test_python_edge_cases():
    source = textwrap.dedent('''\
        import functools

        @functools.lru_cache()
        def cached(x):
            """Return x twice, e.g. for tests. More text."""
            return x * 2

        class Box:
            async def open(self):  # ünïcode before the docstring
                """Open the box."""

            def one_liner(self): "Close it now."; return 1

            def outer(self):
                """Build the helper function."""
                def helper():
                    """Help the outer function."""
                    return 3
                return helper
        ''')
    found = {f.symbol: f for f in documented_functions(source, "python")}
    assert set(found) == {"cached", "Box.open", "Box.one_liner", "Box.outer", "Box.outer.<locals>.helper"}
    copy, new_offset = apply_edits(source, [f.removal for f in found.values()])
    ast.parse(copy)
    assert "Return x" not in copy and "Open the box" not in copy and "Close it" not in copy
    assert copy[new_offset(found["cached"].start):].startswith("@functools.lru_cache()\ndef cached(x):\n    return")
    assert copy[new_offset(found["Box.open"].start):new_offset(found["Box.open"].end)] == (
        "async def open(self):  # ünïcode before the docstring\n        pass")
    assert copy[new_offset(found["Box.one_liner"].start):new_offset(found["Box.one_liner"].end)] == (
        "def one_liner(self): pass; return 1")
    assert first_sentence(found["cached"].doc) == "Return x twice, e.g. for tests."


def test_first_sentence():
    assert first_sentence("Parse a stream.\n\nMore.") == "Parse a stream."
    assert first_sentence("Load all\n   documents from a file, i.e. every one. Then stop.") == (
        "Load all documents from a file, i.e. every one.")
    assert first_sentence("Version 1.2 of the parser") == "Version 1.2 of the parser"
    assert first_sentence("") == ""


edits = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 6), st.text("xy", max_size=5)), max_size=6)


@settings(max_examples=150, deadline=None)
@given(st.text("abcdef\n", min_size=0, max_size=70), edits)
def test_apply_edits_maps_every_untouched_character(text, raw):
    chosen, taken = [], set()
    for start, length, rep in raw:
        start = min(start, len(text))
        end = min(start + length, len(text))
        span = set(range(start, end + 1))
        if span & taken:
            continue
        taken |= span
        chosen.append(Edit(start, end, rep))
    new, new_offset = apply_edits(text, chosen)
    inside = {i for e in chosen for i in range(e.start, e.end)}
    for i, ch in enumerate(text):
        if i not in inside:
            assert new[new_offset(i)] == ch
    assert len(new) == len(text) + sum(len(e.text) - (e.end - e.start) for e in chosen)


# --------------------------------------------------------------------------- tree-sitter languages
SOURCES = {
    "lib/math.js": ('''\
/**
 * Add two numbers together.
 * @param {number} a
 */
export function add(a, b) { return a + b; }

class Timer {
  /** Start the {@link Timer} from {@link Clock zero}. */
  start() { this.t = 0; }
}

/** Double a value with an arrow. */
const twice = (x) => x * 2;

/** @returns {number} */
function tagsOnly() { return 1; }
''', {"add": "Add two numbers together.", "Timer.start": "Start the Timer from zero.",
      "twice": "Double a value with an arrow."}),
    "src/shapes.ts": ('''\
/** Compute the area of a circle. */
export function area(r: number): number { return 3.14 * r * r; }
class Square { /** Scale the side by a factor. */ scale(f: number): void {} }
''', {"area": "Compute the area of a circle.", "Square.scale": "Scale the side by a factor."}),
    "net/conn.go": ('''\
package net

// Dial opens a connection to the address.
// It retries once.
func Dial(addr string) error { return nil }

// Close shuts the connection down.
func (c *Conn) Close() error { return nil }

// not attached

func bare() {}
''', {"Dial": "Dial opens a connection to the address.", "Conn.Close": "Close shuts the connection down."}),
    "src/lib.rs": ('''\
/// Parse the header line.
/// Errors on empty input.
#[inline]
pub fn parse(s: &str) -> usize { s.len() }

impl Reader {
    /// Create a reader over the buffer.
    fn new() -> Self { Reader }
}

//// Not a doc comment at all.
fn plain() {}
''', {"parse": "Parse the header line.", "Reader.new": "Create a reader over the buffer."}),
    "src/Cache.java": ('''\
class Cache {
  /**
   * Look up a key in the cache.
   * @param key the key
   */
  @Override
  public String get(String key) { return null; }

  /** Create an empty cache store. */
  Cache() {}
}
''', {"Cache.get": "Look up a key in the cache.", "Cache.Cache": "Create an empty cache store."}),
}


def test_doc_comments_in_each_tree_sitter_language(tmp_path):
    src = tmp_path / "src"
    for rel, (text, _) in SOURCES.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text, encoding="utf-8")
    report = build_code_qa(src, tmp_path / "out")
    questions = {(q["references"][0]["doc_id"], q["symbol"]): q for q in read_questions(tmp_path / "out")}
    want = {(rel, sym): sentence for rel, (_, expected) in SOURCES.items() for sym, sentence in expected.items()}
    assert {k: q["question"] for k, q in questions.items()} == want
    assert report.dropped_questions["too_short"] == 1  # the tags-only JSDoc
    assert set(report.questions_by_language) == {"javascript", "typescript", "go", "rust", "java"}
    for (rel, sym), q in questions.items():
        copy = (tmp_path / "out" / "docs" / rel).read_text(encoding="utf-8")
        ref = q["references"][0]
        assert copy[ref["start_index"]:ref["end_index"]] == ref["content"]
        assert "/**" not in copy and "///" not in copy.replace("////", "")
    refs = {sym: q["references"][0]["content"] for (_, sym), q in questions.items()}
    assert refs["add"] == "export function add(a, b) { return a + b; }"
    assert refs["parse"].startswith("#[inline]\npub fn parse")
    assert refs["Cache.get"].startswith("@Override\n  public String get")
    assert refs["Square.scale"] == "scale(f: number): void {}"
    go_copy = (tmp_path / "out" / "docs" / "net/conn.go").read_text(encoding="utf-8")
    assert "// not attached" in go_copy and "retries once" not in go_copy


@pytest.mark.skipif(not UNDICI_SRC.is_dir(), reason="npm's bundled undici is not installed on this machine")
def test_real_javascript_package(tmp_path):
    report = build_code_qa(UNDICI_SRC, tmp_path / "out", languages=["javascript"])
    assert report.files > 50 and report.questions > 20
    dataset = load_dataset(DatasetConfig(path=str(tmp_path / "out")))  # checks every offset
    assert len(dataset.queries) == report.questions


# --------------------------------------------------------------------------- CLI and errors
def test_cli_builds_and_refuses_to_overwrite(tmp_path, capsys):
    out = tmp_path / "json-qa"
    assert kbench_main(["datasets", "build", "code-qa", str(JSON_SRC), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    n = len(read_questions(out))
    assert f"{n} questions" in printed and n >= 10
    with pytest.raises(SystemExit) as e:
        kbench_main(["datasets", "build", "code-qa", str(JSON_SRC), "--out", str(out)])
    assert e.value.code == 2 and "--force" in capsys.readouterr().err
    assert kbench_main(["datasets", "build", "code-qa", str(JSON_SRC), "--out", str(out), "--force"]) == 0
    assert len(read_questions(out)) == n


def test_bad_input_errors(tmp_path):
    with pytest.raises(CodeQAError, match="not a folder"):
        build_code_qa(tmp_path / "missing", tmp_path / "out")
    with pytest.raises(CodeQAError, match="unknown languages"):
        build_code_qa(JSON_SRC, tmp_path / "out", languages=["cobol"])
    with pytest.raises(CodeQAError, match="no source files"):
        build_code_qa(JSON_SRC, tmp_path / "out2", languages=["go"])
    with pytest.raises(CodeQAError, match="inside the source tree"):
        build_code_qa(tmp_path, tmp_path / "out3")


@pytest.mark.slow
def test_a_real_minilm_run_on_a_code_qa_set(tmp_path, workspace, config_for):
    from kbench.runner import run_experiment

    build_code_qa(JSON_SRC, tmp_path / "json-qa")
    config = load_experiment(config_for(dataset={"path": str(tmp_path / "json-qa")},
                                        chunking={"strategy": "fixed", "chunk_size": 800, "chunk_overlap": 0},
                                        retrieval={"legs": ["vector"], "top_k": 10, "latency": "batch"},
                                        evaluation={"k": [5, 10]}))
    result = run_experiment(config, progress=False, log=False)
    m = result.metrics
    assert result.counts["queries"] >= 10
    assert 0 < m["span_recall_at_5"] <= m["span_recall_at_10"] <= 1
    assert m["span_precision_omega"] > m["span_precision_at_10"]
