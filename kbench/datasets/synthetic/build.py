"""The builder: documents -> proposals -> a seeded stratified sample -> removals applied, offsets recomputed
-> near-duplicates and verbatim leftovers dropped -> leakage measured (and filtered) -> a span dataset.

The set is written to a hidden folder beside ``--out``, loaded back with the span loader (every reference's
text checked against its indexed copy) and only then renamed into place, so a failure leaves nothing
half-written. ``manifest.json`` holds the provenance (method, seed, options, model and prompt hash for the
llm method, the SHA-256 of every source document) and the report: what was kept, what was rejected, why.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable

from kbench.datasets.code_qa import apply_edits
from kbench.datasets.spans import load_kbench_spans
from kbench.datasets.synthetic.base import Proposal, Proposals, SyntheticError, stratified_sample
from kbench.datasets.synthetic.leakage import (PassageIndex, near_duplicate_groups, overlap_stratum, rank_stratum,
                                               word_overlap)
from kbench.records import Document

# Suffixes the folder loader reads back verbatim (anything else, e.g. .html or .pdf, is written as .md)
VERBATIM_SUFFIXES = {".md", ".markdown", ".mdx", ".txt", ".rst", ".py", ".pyi", ".ts", ".tsx", ".js", ".jsx",
                     ".mjs", ".cjs", ".go", ".java", ".rs", ".yaml", ".yml", ".json", ".commit"}
MIN_REFERENCE_WORDS = 3


@dataclass
class BuildReport:
    method: str
    out: str
    documents: int = 0
    documents_with_questions: int = 0
    proposals: int = 0
    kept: int = 0
    rejected: Counter = field(default_factory=Counter)  # reason -> count
    skipped_files: dict[str, int] = field(default_factory=dict)
    skipped_examples: dict[str, list[str]] = field(default_factory=dict)  # reason -> the first few files
    leakage: dict[str, dict[str, int]] = field(default_factory=dict)  # bm25_rank / word_overlap strata
    cache: dict[str, int] = field(default_factory=dict)  # llm: hits, misses

    def as_dict(self) -> dict:
        return {"method": self.method, "out": self.out, "documents": self.documents,
                "documents_with_questions": self.documents_with_questions, "proposals": self.proposals,
                "kept": self.kept, "rejected": dict(sorted(self.rejected.items())),
                "skipped_files": self.skipped_files, "leakage": self.leakage, "cache": self.cache}


@dataclass(frozen=True)
class Filters:
    max_word_overlap: float | None = None  # drop questions sharing more of their words with the reference
    min_bm25_rank: int | None = None  # drop questions whose gold passage BM25 ranks above this (1 = first)


def file_name(document: Document) -> str:
    """Where the document goes under docs/: its id when that is a safe relative path the loader reads back
    verbatim, else the id with ``.md`` (markdown, HTML, PDF, DOCX) or ``.txt``."""
    path = PurePosixPath(document.doc_id.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise SyntheticError(f"document id {document.doc_id!r} is not a relative path; cannot write it under docs/")
    if path.suffix.lower() in VERBATIM_SUFFIXES:
        return path.as_posix()
    return path.as_posix() + (".txt" if document.doc_type in ("text", "code") else ".md")


def _collapse(text: str) -> str:
    return " ".join(text.split())


def build_synthetic(documents: list[Document], out: str | Path, *, method: str,
                    propose: Callable[[Document], Proposals], seed: int = 0, per_doc: int | None = None,
                    max_questions: int | None = None, filters: Filters = Filters(), force: bool = False,
                    provenance: dict[str, Any] | None = None, skipped_files: dict[str, list[str]] | None = None,
                    verbatim_scope: str = "corpus", report_extra: Callable[[BuildReport], None] | None = None
                    ) -> BuildReport:
    """Build the set under ``out``; ``propose`` is the method bound to its options."""
    out = check_out(out, None, force)
    skipped = {k: len(v) for k, v in (skipped_files or {}).items()}
    documents = [d for d in documents if d.text.strip()]
    if not documents:
        why = f" (skipped: {', '.join(f'{v} {k}' for k, v in sorted(skipped.items()))})" if skipped else ""
        also = ("; files other than documentation are taken only when --include names them"
                if "not_documentation" in skipped else "")
        raise SyntheticError(f"synthetic {method}: the source has no readable document{why}; point it at a folder "
                             f"of documentation files (binary, empty and non-UTF-8 files are skipped){also}")
    report = BuildReport(method, str(out), documents=len(documents), skipped_files=skipped,
                         skipped_examples={k: list(v[:5]) for k, v in (skipped_files or {}).items()})
    names = {d.doc_id: file_name(d) for d in documents}
    if len(set(names.values())) < len(names):
        raise SyntheticError("two documents would be written to the same file under docs/; rename one")

    by_doc: dict[str, list[Proposal]] = {}
    for d in documents:
        found = propose(d)
        report.rejected.update(found.rejected)
        if found.items:
            by_doc[d.doc_id] = found.items
    report.proposals = sum(len(v) for v in by_doc.values())
    if report_extra is not None:
        report_extra(report)
    if not by_doc:
        reasons = ", ".join(f"{v} {k}" for k, v in sorted(report.rejected.items())) or "nothing to propose"
        raise SyntheticError(f"synthetic {method}: no document gave a question ({reasons}); "
                             + HINTS.get(method, "check the source"))
    # every candidate in the sampling order, then as many as --max needs: a candidate the checks below reject is
    # replaced by the next one, so --max N gives N questions whenever N candidates pass
    ordered, dropped = stratified_sample(by_doc, per_doc=per_doc, max_questions=None, seed=seed)
    report.rejected.update(dropped)
    target = len(ordered) if max_questions is None else min(max_questions, len(ordered))
    while True:
        rows, indexed, rejected, made = _place(ordered[:target], documents, names, method, filters, verbatim_scope)
        if max_questions is None or len(rows) >= max_questions or target >= len(ordered):
            break
        target = min(len(ordered), target + max_questions - len(rows))
    unneeded = len(ordered) - target  # never examined: --max was reached without them
    final = made if max_questions is None else made[:max_questions]
    unneeded += len(made) - len(final)
    if len(final) < target:  # some were rejected or not needed: the indexed copy keeps only the questions' edits
        rows, indexed, again, made = _place(final, documents, names, method, filters, verbatim_scope)
        rejected.update(again)  # rare: a question whose removed text another's removal had hidden
    report.rejected.update(rejected)
    report.rejected["over_max"] += unneeded
    report.rejected = Counter({k: v for k, v in report.rejected.items() if v})
    if not rows:
        reasons = ", ".join(f"{v} {k}" for k, v in sorted(report.rejected.items()))
        raise SyntheticError(f"synthetic {method}: every candidate question was rejected ({reasons}); loosen the "
                             "filters or give more documents")
    for n, row in enumerate(rows, 1):
        row["query_id"] = f"{method}-{n:04d}"
    report.kept = len(rows)
    report.documents_with_questions = len({r["references"][0]["doc_id"] for r in rows})
    report.leakage = {"bm25_rank": dict(Counter(rank_stratum(r["leakage"]["bm25_rank"]) for r in rows)),
                      "word_overlap": dict(Counter(overlap_stratum(r["leakage"]["word_overlap"]) for r in rows))}

    manifest = {"kind": SET_KIND, "method": method, "seed": seed, "per_doc": per_doc,
                "max_questions": max_questions, "filters": vars(filters), **(provenance or {}),
                "source_hashes": {names[d.doc_id]: d.content_hash for d in documents},
                "report": report.as_dict()}
    write_set(out, indexed, names, rows, manifest, force)
    return report


def _place(chosen: list[Proposal], documents: list[Document], names: dict[str, str], method: str, filters: Filters,
           verbatim_scope: str) -> tuple[list[dict], dict[str, str], Counter, list[Proposal]]:
    """The questions ``chosen`` makes: their removals applied to the indexed copy (only theirs), each checked
    (reference left, removed text gone, no near-duplicate, the filters); the rows, the indexed copy, the rejections
    and the proposals the rows come from (in the rows' order)."""
    rejected: Counter = Counter()

    # removals applied per document; offsets mapped into the indexed copy
    text_of = {d.doc_id: d.text for d in documents}
    indexed = dict(text_of)
    placed: list[tuple[Proposal, int, int]] = []
    for doc_id in sorted({p.doc_id for p in chosen}):
        mine = [p for p in chosen if p.doc_id == doc_id]
        copy, new_offset = apply_edits(text_of[doc_id], [p.removal for p in mine if p.removal is not None])
        indexed[doc_id] = copy
        for p in mine:
            start, end = new_offset(p.ref_start), new_offset(p.ref_end)
            piece = copy[start:end]
            start += len(piece) - len(piece.lstrip())
            end -= len(piece) - len(piece.rstrip())
            placed.append((p, start, end))
    order = {id(p): i for i, p in enumerate(chosen)}
    placed.sort(key=lambda x: order[id(x[0])])

    flat = " ".join(_collapse(t) for t in indexed.values()) if verbatim_scope == "corpus" else ""
    kept: list[tuple[Proposal, int, int]] = []
    for p, start, end in placed:
        removed = _collapse(text_of[p.doc_id][p.removal.start:p.removal.end]) if p.removal else ""
        if end <= start or len(indexed[p.doc_id][start:end].split()) < MIN_REFERENCE_WORDS:
            rejected["reference_empty_after_removal"] += 1
        elif removed and removed in (flat if verbatim_scope == "corpus" else _collapse(indexed[p.doc_id])):
            rejected["still_in_indexed_copy"] += 1
        else:
            kept.append((p, start, end))
    duplicates = near_duplicate_groups([p.question for p, _, _ in kept])
    rejected["near_duplicate_question"] += sum(d is not None for d in duplicates)
    kept = [k for k, d in zip(kept, duplicates) if d is None]

    index = PassageIndex(indexed) if kept else None
    rows, made = [], []
    for p, start, end in kept:
        reference = indexed[p.doc_id][start:end]
        rank = index.gold_rank(p.question, [(p.doc_id, start, end)])
        overlap = round(word_overlap(p.question, reference), 4)
        if filters.max_word_overlap is not None and overlap > filters.max_word_overlap:
            rejected["filtered_word_overlap"] += 1
            continue
        if filters.min_bm25_rank is not None and rank < filters.min_bm25_rank:
            rejected["filtered_bm25_rank"] += 1
            continue
        rows.append({"question": p.question, "references": [
            {"doc_id": names[p.doc_id], "start_index": start, "end_index": end, "content": reference}],
            "method": method, "stratum": p.stratum,
            "leakage": {"bm25_rank": rank, "word_overlap": overlap, "passages": len(index.passages)},
            **({"generation": p.metadata["generation"]} if "generation" in p.metadata else {})})
        made.append(p)
    return rows, indexed, rejected, made


SET_KIND = "kbench synthetic set"  # manifest.json's "kind": what --force may replace


def check_out(out: str | Path, source: Path | None, force: bool) -> Path:
    """``out`` resolved, or a SyntheticError before any work: never the source, a folder holding it or inside it,
    and ``--force`` replaces only a set kbench built (a folder with its manifest), never someone's files."""
    out = Path(out).expanduser().resolve()
    if source is not None:
        source = source.expanduser().resolve()
        if out == source or out in source.parents:
            raise SyntheticError(f"--out {out} is or holds the source {source}: replacing it would delete the "
                                 "documents; choose a new folder outside the source")
        if source in out.parents:
            raise SyntheticError(f"--out {out} is inside the source {source}: the set would be read back as "
                                 "documents; choose a new folder outside the source")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        if not force:
            raise SyntheticError(f"--out {out} exists and is not empty; choose a new folder or pass --force to "
                                 "replace it")
        if not is_built_set(out):
            raise SyntheticError(f"--out {out} holds files kbench did not write (no manifest.json of a set); "
                                 "--force replaces only a set built before: choose a new folder")
    return out


def is_built_set(folder: Path) -> bool:
    try:
        return json.loads((folder / "manifest.json").read_text(encoding="utf-8")).get("kind") == SET_KIND
    except (OSError, ValueError, AttributeError):
        return False


HINTS = {
    "ict": "ict needs prose: paragraphs of two or more sentences in markdown or text files (try --method heading "
           "for structured docs)",
    "heading": "heading needs markdown sections: '#' headings with a body under them (try --method ict for prose "
               "without headings)",
    "commits": "commits needs a git repository with commits that change files (check --since, --max-commits and "
               "the path globs)",
    "llm": "llm needs documents with text the model can quote",
}


def write_set(out: Path, indexed: dict[str, str], names: dict[str, str], rows: list[dict], manifest: dict,
              force: bool) -> None:
    """Write to a hidden sibling folder, load it back through the span loader, then rename into place."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".partial-{out.name}-", dir=out.parent))
    try:
        for doc_id, text in indexed.items():
            if not text.strip():
                continue
            target = tmp / "docs" / names[doc_id]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8", newline="\n")
        with (tmp / "questions.jsonl").open("w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps({"query_id": row["query_id"], **{k: v for k, v in row.items() if k != "query_id"}},
                                   ensure_ascii=False) + "\n")
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False), encoding="utf-8")
        loaded = load_kbench_spans(tmp, out.name)  # every offset and content checked against the indexed copy
        if len(loaded.queries) != len(rows):
            raise SyntheticError(f"internal: wrote {len(rows)} questions, read back {len(loaded.queries)}")
        if out.exists():
            shutil.rmtree(out) if out.is_dir() else out.unlink()
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
