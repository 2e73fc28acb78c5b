"""Loaders by file type: a file's bytes -> the text chunkers see, its document type and metadata.

- markdown (.md, .markdown, .mdx) and text (.txt, .rst, anything else that decodes): read as UTF-8 with
  newlines normalised like Python's ``read_text`` (``\\r\\n`` and ``\\r`` -> ``\\n``), so span offsets
  written against ``read_text`` stay valid;
- HTML (.html, .htm): converted to markdown with markdownify (what a crawler stores), type ``html``;
- PDF: the text of every page with pypdf, pages joined by a blank line, type ``pdf``;
- DOCX: paragraphs (headings as markdown ``#`` lines) and table rows with python-docx, type ``docx``;
- a commit written by the git source (.commit), type ``commit``;
- source code by extension (python, typescript, javascript, go, java, rust), type ``code`` with its
  ``language``;
- YAML/JSON that is an OpenAPI or Swagger spec (top-level ``openapi``/``swagger`` key), type ``openapi``;
  other YAML/JSON is ``text``.

A file is skipped, with a reason, rather than loaded or crashing: ``oversized`` (more than
``max_file_bytes``; Supabase caps uploads at 10 MB), ``empty`` (no bytes, or no text after
extraction), ``binary`` (a NUL byte in its first 8 KB, for types read as text), ``undecodable`` (not
UTF-8), ``unreadable`` (a PDF/DOCX the library cannot open, or a file the system will not read).
"""
from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

CODE_LANGUAGES = {".py": "python", ".pyi": "python", ".ts": "typescript", ".tsx": "typescript",
                  ".mts": "typescript", ".cts": "typescript", ".js": "javascript", ".jsx": "javascript",
                  ".mjs": "javascript", ".cjs": "javascript", ".go": "go", ".java": "java", ".rs": "rust"}
MARKDOWN_EXTENSIONS = {".md", ".markdown", ".mdx"}
HTML_EXTENSIONS = {".html", ".htm"}
SPEC_EXTENSIONS = {".yaml", ".yml", ".json"}
# what a documentation folder holds: read by default where a source is documentation (a synthetic set's source);
# anything else there (LICENSE, a COMMIT file, code, data) is skipped as ``not_documentation`` unless globs ask for it
DOCUMENTATION_EXTENSIONS = frozenset({*MARKDOWN_EXTENSIONS, ".rst", ".txt", ".adoc", ".asciidoc", *HTML_EXTENSIONS,
                                      ".pdf", ".docx"})
NOT_DOCUMENTATION = "not_documentation"
DEFAULT_MAX_FILE_BYTES = 10 * 1024 * 1024
SKIP_REASONS = ("oversized", "empty", "binary", "undecodable", "unreadable")


@dataclass(frozen=True)
class LoadedFile:
    text: str
    doc_type: str  # markdown | text | code | openapi | html | pdf | docx
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SkippedFile:
    reason: str  # one of SKIP_REASONS
    detail: str = ""


class _Skip(Exception):
    def __init__(self, reason: str, detail: str = ""):
        super().__init__(detail)
        self.reason, self.detail = reason, detail


def normalise_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def decode_text(data: bytes) -> str:
    if b"\x00" in data[:8192]:
        raise _Skip("binary", "NUL byte in the first 8 KB")
    try:
        return normalise_newlines(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise _Skip("undecodable", f"not UTF-8 at byte {e.start}") from None


def load_markdown(data: bytes, path: Path) -> LoadedFile:
    return LoadedFile(decode_text(data), "markdown")


def load_text(data: bytes, path: Path) -> LoadedFile:
    return LoadedFile(decode_text(data), "text")


def load_commit(data: bytes, path: Path) -> LoadedFile:
    """A commit the git source rendered (``<sha>.commit``), read back as type ``commit``."""
    return LoadedFile(decode_text(data), "commit")


def load_code(data: bytes, path: Path) -> LoadedFile:
    return LoadedFile(decode_text(data), "code", {"language": CODE_LANGUAGES[path.suffix.lower()]})


def load_html(data: bytes, path: Path) -> LoadedFile:
    from bs4 import BeautifulSoup
    from markdownify import markdownify

    soup = BeautifulSoup(decode_text(data), "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup(["script", "style", "noscript", "template", "head"]):  # markdownify would keep their text
        tag.decompose()
    text = normalise_newlines(markdownify(str(soup), heading_style="ATX"))
    text = "\n".join(line.rstrip() for line in text.strip().split("\n"))
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return LoadedFile(text, "html", {"converted_from": "html", "html_title": title})


def load_pdf(data: bytes, path: Path) -> LoadedFile:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        pages = [normalise_newlines(page.extract_text() or "").strip() for page in reader.pages]
    except (PdfReadError, ValueError, KeyError, TypeError) as e:
        raise _Skip("unreadable", f"pypdf: {e}") from None
    return LoadedFile("\n\n".join(p for p in pages if p), "pdf", {"pages": len(pages)})


def load_docx(data: bytes, path: Path) -> LoadedFile:
    import zipfile

    import docx

    try:
        document = docx.Document(io.BytesIO(data))
    except (zipfile.BadZipFile, KeyError, ValueError) as e:
        raise _Skip("unreadable", f"python-docx: {e}") from None
    blocks = []
    for paragraph in document.paragraphs:
        text = paragraph.text.strip()
        if not text:
            continue
        style = (paragraph.style.name or "") if paragraph.style is not None else ""
        if style.startswith("Heading") and style[7:].strip().isdigit():
            text = "#" * min(int(style[7:]), 6) + " " + text
        elif style == "Title":
            text = "# " + text
        blocks.append(text)
    for table in document.tables:
        for row in table.rows:
            cells = [" ".join(c.text.split()) for c in row.cells]
            if any(cells):
                blocks.append("| " + " | ".join(cells) + " |")
    return LoadedFile("\n\n".join(blocks), "docx")


def load_spec_or_text(data: bytes, path: Path) -> LoadedFile:
    text = decode_text(data)
    try:
        parsed = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError, RecursionError):  # not a spec; nested too deeply to be one either
        parsed = None
    if isinstance(parsed, dict) and ({"openapi", "swagger"} & set(parsed)):
        version = parsed.get("openapi") or parsed.get("swagger")
        return LoadedFile(text, "openapi", {"openapi_version": str(version)})
    return LoadedFile(text, "text")


LOADERS: dict[str, Callable[[bytes, Path], LoadedFile]] = {
    **{ext: load_code for ext in CODE_LANGUAGES},
    **{ext: load_markdown for ext in MARKDOWN_EXTENSIONS},
    **{ext: load_html for ext in HTML_EXTENSIONS},
    **{ext: load_spec_or_text for ext in SPEC_EXTENSIONS},
    ".pdf": load_pdf,
    ".docx": load_docx,
    ".commit": load_commit,
}


def doc_type_for(path: Path) -> str:
    """The document type a file's extension suggests (YAML/JSON is checked for OpenAPI only when loaded)."""
    loader = LOADERS.get(path.suffix.lower(), load_text)
    return {load_code: "code", load_markdown: "markdown", load_html: "html", load_pdf: "pdf",
            load_docx: "docx", load_spec_or_text: "openapi", load_commit: "commit"}.get(loader, "text")


def load_file(path: Path, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES) -> LoadedFile | SkippedFile:
    """Load one file by its extension, or say why it was skipped."""
    try:
        size = path.stat().st_size
        if size > max_file_bytes:
            return SkippedFile("oversized", f"{size} bytes > max_file_bytes {max_file_bytes}")
        if size == 0:
            return SkippedFile("empty", "0 bytes")
        data = path.read_bytes()
    except OSError as e:  # no permission, removed while walking, a device that fails to read
        return SkippedFile("unreadable", f"{type(e).__name__}: {e.strerror or e}")
    try:
        loaded = LOADERS.get(path.suffix.lower(), load_text)(data, path)
    except _Skip as skip:
        return SkippedFile(skip.reason, skip.detail)
    if not loaded.text.strip():
        return SkippedFile("empty", "no text after loading")
    metadata = {**loaded.metadata, "file_sha256": hashlib.sha256(data).hexdigest(), "file_bytes": size}
    return LoadedFile(loaded.text, loaded.doc_type, metadata)
