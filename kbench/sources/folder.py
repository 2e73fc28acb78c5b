"""A folder source (the GWI spec's ``content_sources``): files matched by include/exclude globs.

Patterns are matched against the path relative to the folder, POSIX-style, with ``**`` spanning any
number of folders (``**/*.py`` also matches ``setup.py`` at the top; ``**/node_modules/**`` excludes
everything under any node_modules folder). A file is taken when it matches an include pattern (all files
when include is empty) and no exclude pattern. Each document keeps its relative path (doc_id and url), a
source id, its type and its content hash (``Document.content_hash``; ``file_sha256`` for the raw bytes).
Skipped files are returned by reason, never dropped silently. A source of documentation (``skip_generated``: a
generated set's source, ``kbench chunk FOLDER``) also skips a theme's templates and generated API stubs
(``template``, ``generated_stub``: kbench/sources/generated.py).

Nothing outside the folder is read: a link whose target lies outside it (``docs/passwd -> /etc/passwd``) is
skipped as ``outside_root`` and a link to nothing as ``broken_link``. Links to folders are not descended
into (a link inside the folder reaches files already walked by their own path).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from kbench.errors import ConfigError
from kbench.records import Document
from kbench.sources.generated import HTML_SUFFIXES, markdown_title, not_documentation
from kbench.sources.loaders import DEFAULT_MAX_FILE_BYTES, NOT_DOCUMENTATION, LoadedFile, load_file

OUTSIDE_ROOT = "outside_root"
BROKEN_LINK = "broken_link"

DEFAULT_EXCLUDE = ["**/.git/**", "**/node_modules/**", "**/dist/**", "**/build/**", "**/*.min.js",
                   "**/__pycache__/**"]


@lru_cache(maxsize=256)  # the same few patterns are matched against every file of a folder
def glob_regex(pattern: str) -> re.Pattern:
    """A glob as a regex over POSIX relative paths: ``**/`` any folders, ``*`` and ``?`` within one name."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("/**", i) and i + 3 == len(pattern):
            out.append("(?:/.*)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def matches(relative: str, patterns: list[str]) -> bool:
    return any(glob_regex(p).match(relative) for p in patterns)


def is_inside(path: Path, root: Path) -> bool:
    """Does ``path`` stay inside ``root`` once every link in either is followed?"""
    return path.resolve().is_relative_to(root.resolve())


@dataclass
class FolderSource:
    root: Path
    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=lambda: list(DEFAULT_EXCLUDE))
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    source_id: str | None = None  # default: the first folder of each file's relative path
    # only files with these suffixes (loaders.DOCUMENTATION_EXTENSIONS), the others skipped as not_documentation;
    # None: every file. Applies only when ``include`` is empty: include globs say what to take
    suffixes: frozenset[str] | None = None
    # skip what is not documentation though it sits in a docs folder: theme templates, mkdocstrings stubs
    # (kbench/sources/generated.py); off for a dataset's docs/, whose builder already chose what it indexes
    skip_generated: bool = False

    @classmethod
    def from_config(cls, config, root: str | Path) -> FolderSource:
        """From a DatasetConfig's include / exclude / max_file_bytes."""
        exclude = list(DEFAULT_EXCLUDE) if config.exclude is None else list(config.exclude)
        return cls(Path(root), list(config.include or []), exclude, config.max_file_bytes)

    def files(self) -> list[tuple[str, Path]]:
        """(relative POSIX path, path) of the files taken, sorted."""
        return self.walk()[0]

    def walk(self) -> tuple[list[tuple[str, Path]], dict[str, list[str]]]:
        """The files taken, sorted, and the links skipped by reason (outside_root, broken_link)."""
        if not self.root.is_dir():
            raise FileNotFoundError(f"source folder {self.root} does not exist or is not a folder")
        out, skipped = [], {}
        root = self.root.resolve()
        walked = included = 0
        for path in sorted(self.root.rglob("*")):
            relative = path.relative_to(self.root).as_posix()
            walked += 1
            if self.include and not matches(relative, self.include):
                continue
            included += 1
            if matches(relative, self.exclude):
                continue
            if path.is_symlink() and not path.exists():
                skipped.setdefault(BROKEN_LINK, []).append(relative)
                continue
            if not path.resolve().is_relative_to(root):
                skipped.setdefault(OUTSIDE_ROOT, []).append(relative)
                continue
            if path.is_file():
                if not self.include and self.suffixes is not None and path.suffix.lower() not in self.suffixes:
                    skipped.setdefault(NOT_DOCUMENTATION, []).append(relative)
                    continue
                out.append((relative, path))
        if self.include and not included:  # globs that take nothing are a typo, not an empty corpus
            raise ConfigError(f"include {self.include} matches none of the {walked:,} paths under {self.root} (a "
                              "glob matches the path relative to the folder: '*.md' only at its top, '**/*.md' in "
                              "every folder); fix the globs or leave include out")
        return out, skipped

    def load(self) -> tuple[list[Document], dict[str, list[str]]]:
        """Documents and the skipped files by reason (reason -> relative paths)."""
        documents: list[Document] = []
        taken, skipped = self.walk()
        for relative, path in taken:
            loaded = load_file(path, self.max_file_bytes)
            if not isinstance(loaded, LoadedFile):
                skipped.setdefault(loaded.reason, []).append(relative)
                continue
            if self.skip_generated and (reason := _not_documentation(relative, path, loaded)):
                skipped.setdefault(reason, []).append(relative)
                continue
            documents.append(to_document(relative, loaded, self.source_id))
        return documents, skipped


def _not_documentation(relative: str, path: Path, loaded: LoadedFile) -> str | None:
    """``template`` or ``generated_stub`` (generated.not_documentation), read from the file's own text (an HTML
    template's Jinja is judged before markdownify turns it into prose)."""
    raw = (path.read_bytes().decode("utf-8", "replace") if path.suffix.lower() in HTML_SUFFIXES
           else loaded.text)
    return not_documentation(relative, raw, loaded.text, loaded.doc_type)


def to_document(relative: str, loaded: LoadedFile, source_id: str | None = None) -> Document:
    """The document of a loaded file; its title is its first level-1 heading outside code (a ``# comment`` in a
    code sample is not one), else its relative path."""
    title = markdown_title(loaded.text) or relative
    return Document(relative, loaded.text, title=title, url=relative,
                    source_id=source_id or relative.split("/")[0], doc_type=loaded.doc_type,
                    metadata={"path": relative, **loaded.metadata})


def load_folder(root: str | Path, include: list[str] | None = None, exclude: list[str] | None = None,
                max_file_bytes: int = DEFAULT_MAX_FILE_BYTES) -> tuple[list[Document], dict[str, list[str]]]:
    source = FolderSource(Path(root), list(include or []),
                          list(DEFAULT_EXCLUDE if exclude is None else exclude), max_file_bytes)
    return source.load()
