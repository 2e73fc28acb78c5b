"""The front door: a README under 12,000 bytes that opens with the two commands and links only to pages that exist,
and a docs site that builds with `mkdocs build --strict` (a broken link or anchor, or a page left out of the
navigation, fails)."""
from __future__ import annotations

import os
import re
import subprocess
import sys

from kbench.paths import REPO_ROOT
from tests.docs.blocks import every_block, fence_defects, shell_blocks

README = REPO_ROOT / "README.md"


def test_the_readme_is_short_and_opens_with_the_two_commands():
    text = README.read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) <= 12_000
    first = shell_blocks(README)[0]
    assert first.code.splitlines()[0].startswith("make run") and first.code.splitlines()[1].startswith("make test")
    assert text.index("```bash") < text.index("\n## ")  # before any section


def test_every_link_of_the_readme_names_a_file_that_exists():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text(encoding="utf-8"))
    assert len(links) > 20
    missing = [link for link in links if not link.startswith("http") and not (REPO_ROOT / link).exists()]
    assert not missing, missing


def test_the_site_builds_strict(tmp_path):
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(REPO_ROOT / "mkdocs.yml"), "--site-dir", str(site)], capture_output=True, text=True,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "WARNING" not in done.stderr, done.stderr[-3000:]
    for page in ("index.html", "systems/index.html", "settings/chunking/index.html", "tutorials/your-own-docs/index.html"):
        assert (site / page).is_file(), page
    landing = (site / "index.html").read_text(encoding="utf-8")
    assert "Where to start" in landing and "fonts.googleapis.com" not in landing  # offline: no web fonts


def test_the_docs_say_how_many_commands_run():
    blocks = every_block()
    ran, skipped = [b for b in blocks if b.skip is None], [b for b in blocks if b.skip is not None]
    print(f"{len(blocks)} shell blocks in README.md and docs/: {len(ran)} run, {len(skipped)} skipped")
    for block in skipped:
        print(f"  skipped {block.where}: {block.skip}")
    assert ran


def test_every_code_fence_of_the_readme_and_docs_closes_where_it_should():
    """mkdocs --strict passed docs/how-to/llm-stages.md with a yaml fence opened inside another (issue 42)."""
    pages = [README, *sorted((REPO_ROOT / "docs").rglob("*.md"))]
    assert [defect for page in pages for defect in fence_defects(page)] == []


def test_a_fence_opened_inside_another_or_never_closed_is_found(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```yaml\n```yaml\na: 1\n```\n\n````markdown\n```bash\nkbench list\n```\n````\n\n```bash\n",
                    encoding="utf-8")
    assert fence_defects(page) == ["page.md:2: a ```yaml fence opened inside the fence of line 1",
                                   "page.md:12: a fence never closed"]
