"""Folder source: include/exclude globs, documents with path, source id, type and hash; skipped by reason."""
from __future__ import annotations

from pathlib import Path

from kbench.config import DatasetConfig
from kbench.datasets import load_dataset
from kbench.sources.folder import FolderSource, load_folder, matches

DEMO = Path(__file__).resolve().parents[2] / "datasets" / "demo"


def test_glob_rules():
    assert matches("setup.py", ["**/*.py"]) and matches("a/b/c.py", ["**/*.py"])
    assert matches("web/node_modules/x/index.js", ["**/node_modules/**"])
    assert not matches("web/src/index.js", ["**/node_modules/**"])
    assert matches("dist/app.min.js", ["**/*.min.js"]) and not matches("app.js", ["**/*.min.js"])
    assert matches("docs/a.md", ["docs/*"]) and not matches("docs/sub/a.md", ["docs/*"])
    assert matches("README", ["**/README*"])


def make_tree(root: Path) -> None:
    files = {
        "README.md": "# Repo\n\nWhat this is.\n",
        "src/app.py": "def main():\n    return 1\n",
        "src/app.min.js": "var a=1;",
        "web/node_modules/lib/index.js": "module.exports = 1;\n",
        "dist/bundle.js": "x();\n",
        "docs/empty.md": "",
        "docs/api.yaml": "openapi: 3.0.0\ninfo: {title: T, version: '1'}\npaths: {}\n",
        "assets/logo.md": b"\x00\x01\x02",
    }
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())


def test_default_excludes_and_skipped_reasons(tmp_path):
    make_tree(tmp_path)
    documents, skipped = load_folder(tmp_path)
    assert sorted(d.doc_id for d in documents) == ["README.md", "docs/api.yaml", "src/app.py"]
    assert skipped == {"empty": ["docs/empty.md"], "binary": ["assets/logo.md"]}
    by_id = {d.doc_id: d for d in documents}
    assert by_id["src/app.py"].doc_type == "code" and by_id["src/app.py"].source_id == "src"
    assert by_id["docs/api.yaml"].doc_type == "openapi"
    assert by_id["README.md"].title == "Repo" and by_id["README.md"].url == "README.md"
    assert len(by_id["README.md"].content_hash) == 64


def test_include_patterns_as_gwi_spec_sources(tmp_path):
    make_tree(tmp_path)
    source = FolderSource(tmp_path, include=["**/*.py", "**/*.js"], exclude=["**/node_modules/**", "**/*.min.js"])
    assert [rel for rel, _ in source.files()] == ["dist/bundle.js", "src/app.py"]


def test_demo_set_loads_as_before_and_globs_apply_to_its_docs():
    dataset = load_dataset(DatasetConfig(name="demo"))
    docs_dir = DEMO / "docs"
    files = sorted(p for p in docs_dir.rglob("*") if p.is_file())
    assert [d.doc_id for d in dataset.documents] == [p.relative_to(docs_dir).as_posix() for p in files]
    assert all(d.text == (docs_dir / d.doc_id).read_text(encoding="utf-8") for d in dataset.documents)
    assert dataset.skipped == {}
    md_only, skipped = FolderSource.from_config(DatasetConfig(name="demo", include=["**/*.md"]), docs_dir).load()
    assert md_only and all(d.doc_type == "markdown" for d in md_only) and not skipped


def make_docs_site(root: Path) -> None:
    """A mkdocs-material site in small: pages, a theme override, a macro-only page, API stubs, a page whose first
    '# ' line is a comment in a code sample, and a page about Jinja whose tags sit in code."""
    api_intro = "Here is the reference of the client, with all its parameters. " * 5  # 55 words: a page
    files = {
        "docs/index.md": "# Home\n\nWelcome to the project; it queues jobs in PostgreSQL.\n",
        "docs/typing.md": "Some prose first.\n\n```python\n# type: ignore\nx = 1\n```\n\n# Typing\n\nMore prose.\n",
        "docs/untitled.md": "```python\n# type: ignore\n```\n\nNo heading outside the code.\n",
        "docs/jinja-guide.md": "# Templates\n\nRender a page:\n\n```jinja\n{% for item in items %}\n{{ item }}\n"
                               "{% endfor %}\n```\n\nUse `{{ name }}` to print a value.\n",
        "docs/people.md": "{% for user in people %}\n{{ user.name }}\n{% endfor %}\n",
        "docs/api/stub.md": "# `Client`\n\n::: lumen.Client\n    options:\n        show_root_heading: true\n",
        "docs/api/client.md": f"# Client\n\n{api_intro}\n\n::: lumen.Client\n",
        "overrides/main.html": "{% extends \"base.html\" %}\n{% block announce %}New release!{% endblock %}\n",
        "docs/page.html": "<html><body><h1>Page</h1><p>An HTML page of the docs.</p>"
                          "<pre><code>{{ not a template }}</code></pre></body></html>",
        "docs/theme.html": "<div>{{ config.site_name }}</div>{% block content %}{% endblock %}",
    }
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")


def test_a_documentation_source_skips_templates_and_stubs_by_reason(tmp_path):
    make_docs_site(tmp_path)
    documents, skipped = FolderSource(tmp_path, skip_generated=True).load()
    assert skipped == {"template": ["docs/people.md", "docs/theme.html", "overrides/main.html"],
                       "generated_stub": ["docs/api/stub.md"]}
    assert sorted(d.doc_id for d in documents) == ["docs/api/client.md", "docs/index.md", "docs/jinja-guide.md",
                                                   "docs/page.html", "docs/typing.md", "docs/untitled.md"]
    # a dataset's docs/ (the default) reads every file: its builder already chose what it indexes
    everything, _ = FolderSource(tmp_path).load()
    assert len(everything) == 10


def test_a_title_never_comes_from_a_comment_in_code(tmp_path):
    make_docs_site(tmp_path)
    titles = {d.doc_id: d.title for d in FolderSource(tmp_path).load()[0]}
    assert titles["docs/typing.md"] == "Typing"
    assert titles["docs/untitled.md"] == "docs/untitled.md"  # no heading outside code: the path, never "type: ignore"
    assert titles["docs/index.md"] == "Home" and titles["docs/api/stub.md"] == "`Client`"
    from kbench.sources.generated import markdown_title

    assert markdown_title("# LLM test file { #llm-test-file }\n\ntext") == "LLM test file"  # attr_list's anchor
    assert markdown_title("# Sets {a, b} of things\n") == "Sets {a, b} of things"  # braces of the title's own
