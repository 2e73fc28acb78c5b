"""``commits`` (no LLM, code-QA style for history): a commit's subject becomes the question, its diff the
reference, and the subject line leaves the indexed copy.

Documents are the ``commit`` documents of the git source (``kbench.sources.git``): the subject on the first
line, the body, the author and date, the changed paths, then the diff. A commit without a diff (an empty or
merge commit, or one whose changes the path globs left out) or with a subject under ``min_words`` words
("wip", "fix") is not a question. Commits are stratified by the top folder of their first changed path.
"""
from __future__ import annotations

from typing import Any

from kbench.datasets.code_qa import Edit
from kbench.datasets.synthetic.base import Proposal, Proposals
from kbench.records import Document

NAME = "commits"
DEFAULTS = {"min_words": 3}
DIFF_MARK = "\ndiff --git "


def propose(document: Document, params: dict[str, Any]) -> Proposals:
    p = {**DEFAULTS, **params}
    found = Proposals()
    if document.doc_type != "commit":
        found.rejected["not_a_commit"] += 1
        return found
    text = document.text
    subject_end = text.find("\n")
    subject = text[:subject_end if subject_end >= 0 else len(text)].strip()
    diff_at = text.find(DIFF_MARK)
    if diff_at < 0:
        found.rejected["commit_without_diff"] += 1
        return found
    if len(subject.split()) < p["min_words"]:
        found.rejected["subject_too_short"] += 1
        return found
    end = len(text.rstrip())
    paths = document.metadata.get("paths") or [""]
    stratum = paths[0].split("/")[0] if "/" in paths[0] else "."
    found.items.append(Proposal(document.doc_id, subject, diff_at + 1, end, Edit(0, subject_end + 1),
                                stratum=stratum, group=document.doc_id,
                                metadata={"commit": document.metadata.get("commit", "")}))
    return found
