"""Loaders by file type, and the reasons files are skipped, on real files written by real libraries."""
from __future__ import annotations

import io
from pathlib import Path

import jupyter_server
import pytest

from kbench.sources.loaders import LoadedFile, SkippedFile, load_file

DEMO_PAGE = Path(__file__).resolve().parents[2] / "datasets" / "demo" / "docs" / "api" / "authentication.md"
SWAGGER = Path(jupyter_server.__file__).parent / "services" / "api" / "api.yaml"


def write(tmp_path: Path, name: str, data: bytes | str) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def test_markdown_text_and_code_read_like_read_text(tmp_path):
    loaded = load_file(DEMO_PAGE)
    assert isinstance(loaded, LoadedFile) and loaded.doc_type == "markdown"
    assert loaded.text == DEMO_PAGE.read_text(encoding="utf-8")
    crlf = load_file(write(tmp_path, "notes.txt", "one\r\ntwo\rthree\n"))
    assert (crlf.text, crlf.doc_type) == ("one\ntwo\nthree\n", "text")
    code = load_file(write(tmp_path, "lib/mod.rs", "fn main() {}\n"))
    assert code.doc_type == "code" and code.metadata["language"] == "rust"
    assert len(code.metadata["file_sha256"]) == 64 and code.metadata["file_bytes"] == 13


def test_html_becomes_markdown(tmp_path):
    html = ("<html><head><style>p{}</style></head><body><h1>Retries</h1><p>Jobs retry with "
            "<a href='https://x.io/b'>backoff</a>.</p><h2>Limits</h2><ul><li>five</li></ul></body></html>")
    loaded = load_file(write(tmp_path, "page.html", html))
    assert loaded.doc_type == "html"
    assert loaded.text.startswith("# Retries\n\nJobs retry with [backoff](https://x.io/b).\n\n## Limits")
    assert "p{}" not in loaded.text


def test_pdf_text_via_pypdf(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure = plt.figure()
    figure.text(0.1, 0.5, "Lumen retries failed jobs with exponential backoff.")
    buffer = io.BytesIO()
    with matplotlib.rc_context({"pdf.fonttype": 42}):
        figure.savefig(buffer, format="pdf")
    plt.close(figure)
    loaded = load_file(write(tmp_path, "manual.pdf", buffer.getvalue()))
    assert loaded.doc_type == "pdf" and loaded.metadata["pages"] == 1
    assert loaded.text == "Lumen retries failed jobs with exponential backoff."


def test_docx_paragraphs_headings_and_tables(tmp_path):
    import docx

    document = docx.Document()
    document.add_heading("Upgrading", level=1)
    document.add_paragraph("Back up the database first.")
    document.add_heading("Steps", level=2)
    table = document.add_table(rows=1, cols=2)
    table.rows[0].cells[0].text, table.rows[0].cells[1].text = "1", "stop workers"
    path = tmp_path / "guide.docx"
    document.save(path)
    loaded = load_file(path)
    assert loaded.doc_type == "docx"
    assert loaded.text == "# Upgrading\n\nBack up the database first.\n\n## Steps\n\n| 1 | stop workers |"


def test_openapi_specs_are_recognised_other_yaml_is_text(tmp_path):
    spec = load_file(SWAGGER)
    assert spec.doc_type == "openapi" and spec.metadata["openapi_version"] == "2.0"
    assert load_file(write(tmp_path, "ci.yml", "jobs: {build: 1}\n")).doc_type == "text"
    assert load_file(write(tmp_path, "spec.json", '{"openapi": "3.0.0", "paths": {}}')).doc_type == "openapi"


@pytest.mark.parametrize("name,data,reason", [
    ("empty.md", b"", "empty"),
    ("blank.md", b"  \n\n ", "empty"),
    ("image.md", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary"),
    ("latin1.txt", "caf\u00e9".encode("latin-1"), "undecodable"),
    ("broken.pdf", b"%PDF-1.4 not really a pdf", "unreadable"),
    ("broken.docx", b"PK not a zip", "unreadable"),
])
def test_bad_files_are_skipped_with_a_reason(tmp_path, name, data, reason):
    skipped = load_file(write(tmp_path, name, data))
    assert isinstance(skipped, SkippedFile) and skipped.reason == reason and skipped.detail


def test_oversized_files_are_skipped_before_reading(tmp_path):
    skipped = load_file(write(tmp_path, "big.md", "x" * 2000), max_file_bytes=1000)
    assert skipped.reason == "oversized" and "2000 bytes" in skipped.detail
