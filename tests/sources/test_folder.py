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
