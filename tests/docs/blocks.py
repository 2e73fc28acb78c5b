"""The shell blocks of README.md and docs/: what tests/docs runs, and what it skips with the reason the page gives.

A block is a fenced ```bash, ```sh or ```console block (in a console block only the lines starting with "$ " are
commands). The line right before its fence may say `<!-- skip: the reason -->`; that block is skipped and counted.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kbench.paths import REPO_ROOT

SHELLS = ("bash", "sh", "console")
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w-]*)\s*$")
SKIP = re.compile(r"^\s*<!--\s*skip:\s*(?P<reason>.+?)\s*-->\s*$")
ANY_FENCE = re.compile(r"^\s*(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    skip: str | None  # the stated reason, or None when it runs

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    """README.md and every page under docs/ except the generated settings reference (it has no commands)."""
    docs = sorted(p for p in (REPO_ROOT / "docs").rglob("*.md") if "settings" not in p.relative_to(REPO_ROOT / "docs").parts)
    return [REPO_ROOT / "README.md", *docs]


def shell_blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if not opened or not opened.group("lang"):
            i += 1
            continue
        indent, lang, start = opened.group("indent"), opened.group("lang"), i
        body = []
        i += 1
        while i < len(lines) and not re.match(rf"^{re.escape(indent)}```\s*$", lines[i]):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        i += 1
        if lang not in SHELLS:
            continue
        if lang == "console":
            body = [line[2:] for line in body if line.startswith("$ ")]
        previous = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        skip = SKIP.match(previous)
        where = path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path
        blocks.append(Block(str(where), start + 1, lang, "\n".join(body),
                            skip.group("reason") if skip else None))
    return blocks


def fence_defects(path: Path) -> list[str]:
    """Fences that do not pair up: an opening fence (one with a language) inside a fence of the same kind, which
    `mkdocs build --strict` renders without a word, so the rest of the page becomes code; or a fence never closed."""
    defects, opened_at, opened = [], 0, ""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        fence = ANY_FENCE.match(line)
        if not fence:
            continue
        marks, info = fence.group("fence"), fence.group("info").strip()
        if not opened:
            opened_at, opened = number, marks
        elif marks[0] == opened[0] and len(marks) >= len(opened):
            if not info:
                opened = ""
            else:
                defects.append(f"{path.name}:{number}: a {marks}{info} fence opened inside the fence of line {opened_at}")
    if opened:
        defects.append(f"{path.name}:{opened_at}: a fence never closed")
    return defects


def every_block() -> list[Block]:
    return [block for page in pages() for block in shell_blocks(page)]
