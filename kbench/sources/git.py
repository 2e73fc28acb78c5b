"""A git source (the GWI spec's historical context): a local repository's commits become documents of
type ``commit``, so the ``historical`` preset (``doc_types: [pr, commit]``) searches something real.

One document per non-merge commit, newest first, read with the ``git`` command (Debian's ``git`` package)
from a local repository only; nothing is fetched. Its text:

    <subject>
    <blank line, the body if any>
    commit <sha> / Author: <name> / Date: <ISO date>
    Changed paths: one "<status>\\t<path>" line each
    the diff (``git show --unified=<context_lines>``), cut after ``max_diff_lines`` lines with a note

``since`` is anything ``git log --since`` takes ("2024-01-01", "3 months ago"); ``include``/``exclude``
are the folder source's globs over changed paths: a commit is kept when one of its paths is taken, and
its paths and diff cover the taken paths only. ``max_commits`` counts kept commits. A document's id is
``<first 12 hex of the sha>.commit`` (the span layout writes it as a file of that name). A sub-folder of a
repository gives the commits that change files under it, paths and diffs relative to it.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from kbench.records import Document
from kbench.sources.folder import matches
from kbench.errors import UserError

FIELD, RECORD = "\x1f", "\x1e"


class GitSourceError(UserError, ValueError):
    """The repository cannot be read (not a repository, no git, a bad --since)."""


@dataclass
class GitSource:
    repo: Path
    since: str | None = None
    max_commits: int | None = None
    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    context_lines: int = 3
    max_diff_lines: int = 400
    relative: list[str] = field(default_factory=list)  # ["--relative"] when the source is a repository's sub-folder

    def git(self, *args: str) -> str:
        if shutil.which("git") is None:
            raise GitSourceError("the git source needs the git command; install it (apt-get install git)")
        done = subprocess.run(["git", "-C", str(self.repo), "-c", "core.quotepath=off", *args],
                              capture_output=True, text=True, encoding="utf-8", errors="replace",
                              env={"PATH": _path(), "LC_ALL": "C", "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent"})
        if done.returncode != 0:
            raise GitSourceError(f"git source {self.repo}: git {args[0]} failed: {done.stderr.strip()[:300]}")
        return done.stdout

    def load(self) -> list[Document]:
        repo = Path(self.repo).expanduser()
        if not repo.is_dir():
            raise GitSourceError(f"git source {repo}: not a folder; give the path of a local git repository")
        self.repo = repo.resolve()
        inside = subprocess.run(["git", "-C", str(self.repo), "rev-parse", "--is-inside-work-tree"],
                                capture_output=True, text=True) if shutil.which("git") else None
        if inside is None:
            raise GitSourceError("the git source needs the git command; install it (apt-get install git)")
        if inside.returncode != 0 and not (self.repo / "HEAD").is_file():
            raise GitSourceError(f"git source {self.repo}: not a git repository (no .git); give the repository's "
                                 "folder, or use a folder source for plain files")
        # A sub-folder of a repository is a source of its own: the commits that change files under it, with
        # paths and diffs relative to it (git prints repository paths; pathspecs read from the sub-folder).
        self.relative = ["--relative"] if inside.returncode == 0 and self.git("rev-parse", "--show-prefix").strip() \
            else []
        args = ["log", "--no-merges", "--no-color", f"--format=%H{FIELD}%an{FIELD}%aI{FIELD}%s{FIELD}%b{RECORD}"]
        if self.since:
            args.append(f"--since={self.since}")
        if self.relative:
            args += ["--", "."]
        try:
            listing = self.git(*args)
        except GitSourceError as e:
            if "does not have any commits" in str(e):
                return []
            raise
        documents = []
        for record in listing.split(RECORD):
            record = record.strip("\n")
            if not record:
                continue
            sha, author, date, subject, body = (record.split(FIELD) + [""] * 5)[:5]
            document = self.commit_document(sha, author, date, subject, body)
            if document is not None:
                documents.append(document)
                if self.max_commits and len(documents) >= self.max_commits:
                    break
        return documents

    def commit_document(self, sha: str, author: str, date: str, subject: str, body: str) -> Document | None:
        status = self.git("show", "--no-color", "--format=", "--name-status", "--no-renames", *self.relative, sha)
        changed = []
        for line in status.splitlines():
            if "\t" in line:
                kind, path = line.split("\t", 1)
                if (not self.include or matches(path, self.include)) and not matches(path, self.exclude):
                    changed.append((kind, path))
        if not changed:
            return None
        diff = self.git("show", "--no-color", "--format=", "--no-renames", f"--unified={self.context_lines}",
                        *self.relative, sha, "--", *[p for _, p in changed])
        diff_lines = diff.rstrip("\n").split("\n") if diff.strip() else []
        if len(diff_lines) > self.max_diff_lines:
            cut = len(diff_lines) - self.max_diff_lines
            diff_lines = diff_lines[:self.max_diff_lines] + [f"[... {cut} more diff lines not shown]"]
        parts = [subject.strip(), body.strip(),
                 f"commit {sha}\nAuthor: {author}\nDate: {date}",
                 "Changed paths:\n" + "\n".join(f"{k}\t{p}" for k, p in changed),
                 "\n".join(diff_lines)]
        text = "\n\n".join(p for p in parts if p) + "\n"
        return Document(f"{sha[:12]}.commit", text, title=subject.strip(), url=f"commit:{sha}",
                        source_id=self.repo.name, doc_type="commit",
                        metadata={"commit": sha, "author": author, "date": date,
                                  "paths": [p for _, p in changed]})


def _path() -> str:
    return os.environ.get("PATH", "/usr/bin:/bin")


def load_git(repo: str | Path, *, since: str | None = None, max_commits: int | None = None,
             include: list[str] | None = None, exclude: list[str] | None = None, context_lines: int = 3,
             max_diff_lines: int = 400) -> list[Document]:
    return GitSource(Path(repo), since, max_commits, list(include or []), list(exclude or []), context_lines,
                     max_diff_lines).load()
