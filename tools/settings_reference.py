"""Write the settings reference (docs/settings/*.md) from the config models; --check only compares.

    PYTHONPATH=$PWD .venv/bin/python tools/settings_reference.py           # after changing a knob
    PYTHONPATH=$PWD .venv/bin/python tools/settings_reference.py --check   # exit 1 when a page is out of date

tests/docs/test_settings_reference.py runs the check in `make test`, so a knob added without regenerating fails CI.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kbench.cli.reference import render_all

PAGES = Path(__file__).resolve().parents[1] / "docs" / "settings"


def stale_pages(folder: Path = PAGES) -> list[str]:
    """Pages whose text differs from what the code gives, and pages no section gives any more."""
    wanted = render_all()
    stale = [name for name, text in wanted.items()
             if not (folder / name).is_file() or (folder / name).read_text(encoding="utf-8") != text]
    return stale + sorted(p.name for p in folder.glob("*.md") if p.name not in wanted)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a page is out of date")
    args = parser.parse_args()
    if args.check:
        stale = stale_pages()
        for name in stale:
            print(f"docs/settings/{name} is out of date: run python tools/settings_reference.py", file=sys.stderr)
        return 1 if stale else 0
    PAGES.mkdir(parents=True, exist_ok=True)
    wanted = render_all()
    for name, text in wanted.items():
        (PAGES / name).write_text(text, encoding="utf-8")
    for old in PAGES.glob("*.md"):
        if old.name not in wanted:
            old.unlink()
    print(f"wrote {len(wanted)} pages to {PAGES}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
