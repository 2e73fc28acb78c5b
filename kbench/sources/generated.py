"""Files in a documentation folder that are not documentation, though they sit beside it: a theme's templates and the
stub pages a documentation generator fills in at build time. A folder source that reads documentation
(``FolderSource(skip_generated=True)``: the source of a generated set, ``kbench chunk FOLDER``) skips them by
reason, counted like every skipped file:

- ``template``: a theme's Jinja template. An HTML file under an ``overrides/`` folder (mkdocs-material's
  ``custom_dir``), an HTML file with a Jinja tag (``{% ... %}``, ``{{ ... }}``, ``{# ... #}``) outside ``<pre>`` and
  ``<code>``, or any other file whose lines outside fenced and inline code are mostly Jinja (at least
  ``TEMPLATE_SHARE`` of its non-blank lines). A page that documents Jinja keeps its examples in code, and a page
  with a few macros in its prose (fastapi's people page) is prose first: both are kept.
- ``generated_stub``: a page made of a mkdocstrings directive (``::: package.module`` and its indented options)
  with fewer than ``STUB_WORDS`` words of prose around it (headings and code not counted): the API reference a
  site renders from docstrings at build time, empty until then.

``markdown_title`` is a page's title: its first level-1 heading outside fenced code, so a ``# type: ignore``
comment in a code sample is never a title; an attribute list after it (``{ #anchor }``) is not part of it.
"""
from __future__ import annotations

import re
from pathlib import PurePosixPath

TEMPLATE = "template"
GENERATED_STUB = "generated_stub"
TEMPLATE_SHARE = 0.5  # of the non-blank lines outside code carrying a Jinja tag: a template, not a page
STUB_WORDS = 30  # words of prose beside a ``:::`` directive under which a page is a generated stub
TEMPLATE_FOLDERS = {"overrides"}
HTML_SUFFIXES = {".html", ".htm", ".jinja", ".jinja2", ".j2"}

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_JINJA = re.compile(r"\{%.*?%\}|\{\{.*?\}\}|\{#.*?#\}", re.S)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_HTML_CODE = re.compile(r"<(pre|code)\b.*?</\1\s*>", re.S | re.I)
_DIRECTIVE = re.compile(r"^:::\s*[\w.]+")
_HEADING = re.compile(r"^ {0,3}#{1,6}(?:[ \t]|$)")
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n.*?\n---[ \t]*(?:\n|\Z)", re.S)
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)
_ATTRIBUTE_LIST = re.compile(r"\s*\{\s*[:#.][^{}]*\}\s*$")  # "# Title { #anchor }": attr_list's, not the title's


def outside_code(text: str, inline: bool = False) -> list[str]:
    """The lines of ``text`` outside fenced code blocks; ``inline``: inline code kept, else taken out."""
    out, fence = [], None
    for line in text.split("\n"):
        found = _FENCE.match(line)
        if fence is None and found:
            fence = found.group(1)[0] * 3
            continue
        if fence is not None:
            if found and found.group(1).startswith(fence) and not line.strip()[len(found.group(1)):].strip():
                fence = None
            continue
        out.append(line if inline else _INLINE_CODE.sub("", line))
    return out


def markdown_title(text: str) -> str | None:
    """The first level-1 ATX heading (``# Title``) outside fenced code, or None."""
    for line in outside_code(text, inline=True):
        if line.startswith("# ") and line[2:].strip():
            return _ATTRIBUTE_LIST.sub("", line[2:].strip().rstrip("#").strip()) or None
    return None


def is_template(relative: str, raw: str) -> bool:
    """A theme's Jinja template (see the module's docstring); ``raw``: the file's text before any conversion."""
    path = PurePosixPath(relative)
    html = path.suffix.lower() in HTML_SUFFIXES
    if html and TEMPLATE_FOLDERS & {part.lower() for part in path.parts[:-1]}:
        return True
    if html:
        return bool(_JINJA.search(_HTML_CODE.sub("", raw)))
    lines = [line for line in outside_code(raw) if line.strip()]
    jinja = sum(1 for line in lines if _JINJA.search(line) or "{%" in line)
    return bool(lines) and jinja >= TEMPLATE_SHARE * len(lines) and jinja > 0


def is_generated_stub(text: str) -> bool:
    """A mkdocstrings page: a ``::: identifier`` directive with fewer than STUB_WORDS words of prose around it."""
    body = _HTML_COMMENT.sub("", _FRONT_MATTER.sub("", text, count=1))
    prose, directive, in_options = [], False, False
    for line in outside_code(body):
        if _DIRECTIVE.match(line):
            directive = in_options = True
            continue
        if in_options and (line.startswith((" ", "\t")) or not line.strip()):
            continue  # the directive's indented options
        in_options = False
        if not _HEADING.match(line):
            prose.append(line)
    return directive and len(" ".join(prose).split()) < STUB_WORDS


def not_documentation(relative: str, raw: str, text: str, doc_type: str) -> str | None:
    """Why a loaded file is not documentation (``template``, ``generated_stub``), or None. ``raw``: its decoded
    bytes; ``text``: what its loader made of them."""
    if doc_type in ("code", "openapi", "commit", "pdf", "docx"):
        return None
    if is_template(relative, raw):
        return TEMPLATE
    if doc_type in ("markdown", "text") and is_generated_stub(text):
        return GENERATED_STUB
    return None
