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
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any, Callable

from kbench.datasets.code_qa import apply_edits
from kbench.datasets.spans import load_kbench_spans
from kbench.datasets.synthetic.base import Proposal, Proposals, SyntheticError, stratified_sample
from kbench.datasets.synthetic.leakage import (PassageIndex, near_duplicate_groups, overlap_stratum, rank_stratum,
                                               word_overlap)
from kbench.datasets.synthetic.prose import headings
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
    available: int = 0  # candidates that pass every check but the filters: the questions these documents can give
    corpus: dict = field(default_factory=dict)  # how the indexed copy differs from the documents (corpus_record)

    def as_dict(self) -> dict:
        return {"method": self.method, "out": self.out, "documents": self.documents,
                "documents_with_questions": self.documents_with_questions, "proposals": self.proposals,
                "kept": self.kept, "rejected": dict(sorted(self.rejected.items())),
                "skipped_files": self.skipped_files, "leakage": self.leakage, "cache": self.cache, "available": self.available,
                "corpus": self.corpus}


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
                    verbatim_scope: str = "corpus", report_extra: Callable[[BuildReport], None] | None = None,
                    keep_documents: bool = False) -> BuildReport:
    """Build the set under ``out``; ``propose`` is the method bound to its options. ``keep_documents``: index the
    documents whole (nothing removed; the leak each question's words give is measured, not prevented)."""
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
    # The indexed copy is decided by every candidate: each one's removal (what would leak: its heading line,
    # its sentence) is applied whatever --max and --per-doc keep, so 20, 200 or every question of these documents
    # index the same corpus, and a set grown later (kbench sweep --until-decided) keeps it.
    # With keep_documents nothing is removed: the documents are indexed whole and the leak is only measured.
    every, _ = stratified_sample(by_doc, per_doc=None, max_questions=None, seed=seed)
    ordered, dropped = stratified_sample(by_doc, per_doc=per_doc, max_questions=None, seed=seed)
    report.rejected.update(dropped)
    if keep_documents:
        every = [replace(p, removal=None) for p in every]
        ordered = [replace(p, removal=None) for p in ordered]
    indexed, placed = _indexed_copy(every, documents)
    # --per-doc N keeps the first N rounds of the round robin over the documents: a prefix of the whole order, so
    # each candidate is checked once, in that order, and the set's candidates are the first of them
    everything = [placed[_key(p)] for p in every]
    if [_key(p) for p in ordered] != [_key(p) for p, _, _ in everything[:len(ordered)]]:
        raise SyntheticError("internal: --per-doc changed the sampling order")
    all_fates, merged = _checked(everything, documents, indexed, verbatim_scope)
    candidates, fates = everything[:len(ordered)], all_fates[:len(ordered)]
    index = PassageIndex(indexed) if "" in fates else None
    rows, rejected, examined = [], Counter(), 0
    for n, ((p, start, end), fate) in enumerate(zip(candidates, fates)):
        if max_questions is not None and len(rows) >= max_questions:
            break
        examined += 1
        if fate:
            rejected[fate] += 1
            continue
        also = [everything[i][1:] + (everything[i][0].doc_id,) for i in merged.get(n, [])]
        row = _row(p, start, end, indexed, names, method, index, filters, also)
        if isinstance(row, str):
            rejected[row] += 1
        else:
            rows.append(row)
    report.rejected.update(rejected)
    report.rejected["over_max"] += len(ordered) - examined  # never examined: --max was reached without them
    report.rejected = Counter({k: v for k, v in report.rejected.items() if v})
    if not rows:
        reasons = ", ".join(f"{v} {k}" for k, v in sorted(report.rejected.items()))
        raise SyntheticError(f"synthetic {method}: every candidate question was rejected ({reasons}); loosen the "
                             "filters or give more documents")
    report.available = sum(1 for fate in all_fates if not fate)  # whatever --per-doc and --max keep
    report.corpus = corpus_record(method, documents, indexed, every)
    for n, row in enumerate(rows, 1):
        row["query_id"] = f"{method}-{n:04d}"
    report.kept = len(rows)
    report.documents_with_questions = len({r["references"][0]["doc_id"] for r in rows})
    report.leakage = {"bm25_rank": dict(Counter(rank_stratum(r["leakage"]["bm25_rank"]) for r in rows)),
                      "word_overlap": dict(Counter(overlap_stratum(r["leakage"]["word_overlap"]) for r in rows))}

    manifest = {"kind": SET_KIND, "method": method, "seed": seed, "per_doc": per_doc,
                "max_questions": max_questions, "filters": vars(filters), "keep_documents": keep_documents,
                **(provenance or {}),
                "source_hashes": {names[d.doc_id]: d.content_hash for d in documents},
                "report": report.as_dict()}
    write_set(out, indexed, names, rows, manifest, force)
    return report


def _indexed_copy(candidates: list[Proposal], documents: list[Document]
                  ) -> tuple[dict[str, str], dict[tuple, tuple[Proposal, int, int]]]:
    """Every candidate's removal applied per document; each proposal's reference mapped into the indexed copy and trimmed
    (keyed by ``_key``)."""
    text_of = {d.doc_id: d.text for d in documents}
    indexed = dict(text_of)
    placed: dict[tuple, tuple[Proposal, int, int]] = {}
    for doc_id in sorted({p.doc_id for p in candidates}):
        mine = [p for p in candidates if p.doc_id == doc_id]
        copy, new_offset = apply_edits(text_of[doc_id], [p.removal for p in mine if p.removal is not None])
        indexed[doc_id] = copy
        for p in mine:
            start, end = new_offset(p.ref_start), new_offset(p.ref_end)
            piece = copy[start:end]
            start += len(piece) - len(piece.lstrip())
            end -= len(piece) - len(piece.rstrip())
            placed[_key(p)] = (p, start, end)
    return indexed, placed


def _key(p: Proposal) -> tuple:
    """A proposal's identity across two samplings of the same candidates (its document, group and question)."""
    return (p.doc_id, p.group, p.question, p.ref_start, p.ref_end)


MERGED = "same_question_as_an_earlier_one"  # not a question of its own: a further reference of that one


def _checked(placed: list[tuple[Proposal, int, int]], documents: list[Document], indexed: dict[str, str],
             verbatim_scope: str) -> tuple[list[str], dict[int, list[int]]]:
    """Each candidate (in the sampling order) checked against the indexed copy: its reference left, its removed text
    gone, no near-duplicate of an earlier one. Returns each candidate's rejection reason ("": it passes) and the
    merges: a candidate asking the very question of an earlier one (the same words, another section: "Tutorial >
    Body" on two pages) is no question of its own but a further reference of the earlier (``MERGED``; the index of
    the earlier -> the indexes of its further references). Each check reads the fixed indexed copy and the
    candidates before it only, so the first N that pass are the same whatever N."""
    text_of = {d.doc_id: d.text for d in documents}
    flat = " ".join(_collapse(t) for t in indexed.values()) if verbatim_scope == "corpus" else ""
    fates: list[str] = []
    for p, start, end in placed:
        removed = _collapse(text_of[p.doc_id][p.removal.start:p.removal.end]) if p.removal else ""
        if end <= start or len(indexed[p.doc_id][start:end].split()) < MIN_REFERENCE_WORDS:
            fates.append("reference_empty_after_removal")
        elif removed and _still_there(removed, p, indexed, flat, verbatim_scope):
            fates.append("still_in_indexed_copy")
        else:
            fates.append("")
    merged: dict[int, list[int]] = {}
    first: dict[str, int] = {}
    for i, fate in enumerate(fates):
        if not fate:
            asked = _asked(placed[i][0].question)
            if asked in first:
                fates[i] = MERGED
                merged.setdefault(first[asked], []).append(i)
            else:
                first[asked] = i
    passing = [i for i, fate in enumerate(fates) if not fate]
    duplicates = near_duplicate_groups([placed[i][0].question for i in passing])
    for i, duplicate in zip(passing, duplicates):
        if duplicate is not None:
            fates[i] = "near_duplicate_question"
            for j in merged.pop(i, []):  # its further references go with it
                fates[j] = "near_duplicate_question"
    return fates, merged


def _asked(question: str) -> str:
    """A question's words, for telling two candidates that ask the same thing (case, spacing and punctuation aside)."""
    return " ".join("".join(ch if ch.isalnum() else " " for ch in question.lower()).split())


def _still_there(removed: str, p: Proposal, indexed: dict[str, str], flat: str, verbatim_scope: str) -> bool:
    """Is the removed text still in the indexed copy (a second copy of a sentence, a heading repeated)? A removal that
    leaves a marker in its place (a heading's bare ``##``) is looked for as a whole line: the marker and the line
    after it must not read as the heading ("##" + "Example usage" is no "## Example")."""
    if p.removal.text:
        texts = indexed.values() if verbatim_scope == "corpus" else [indexed[p.doc_id]]
        return any(_collapse(line) == removed for text in texts for line in text.splitlines())
    return removed in (flat if verbatim_scope == "corpus" else _collapse(indexed[p.doc_id]))


def _row(p: Proposal, start: int, end: int, indexed: dict[str, str], names: dict[str, str], method: str,
         index: PassageIndex, filters: Filters, also: list[tuple[int, int, str]] = ()) -> dict | str:
    """The question's row with its leakage measured, or why a filter drops it. ``also``: further references
    (start, end, document) of candidates asking the same question (``_checked``'s merges)."""
    reference = indexed[p.doc_id][start:end]
    spans = [(p.doc_id, start, end)] + [(doc_id, s, e) for s, e, doc_id in also]
    rank = index.gold_rank(p.question, spans)
    overlap = round(word_overlap(p.question, reference), 4)
    if filters.max_word_overlap is not None and overlap > filters.max_word_overlap:
        return "filtered_word_overlap"
    if filters.min_bm25_rank is not None and rank < filters.min_bm25_rank:
        return "filtered_bm25_rank"
    return {"question": p.question, "references": [
        {"doc_id": names[doc_id], "start_index": s, "end_index": e, "content": indexed[doc_id][s:e]}
        for doc_id, s, e in spans],
        "method": method, "stratum": p.stratum,
        "leakage": {"bm25_rank": rank, "word_overlap": overlap, "passages": len(index.passages)},
        **({"generation": p.metadata["generation"]} if "generation" in p.metadata else {})}


# what one removal takes out of the indexed copy, per method (a method that removes nothing keeps documents whole)
REMOVED_UNIT = {"heading": "heading lines", "ict": "sentences", "commits": "commit subjects"}
MARKED_UNIT = "headings' words"  # a heading removal that leaves its line as a bare marker (heading removal: marker)


def corpus_record(method: str, documents: list[Document], indexed: dict[str, str], candidates: list[Proposal]) -> dict:
    """How the indexed copy differs from the source documents: ``removal`` (``candidates``: every candidate's removal,
    whatever the set's size; ``none``: the documents are whole), how many removals, documents altered, characters
    and markdown headings before and after: ``headings_left`` keep their words, ``markers`` are headings whose words
    went and whose line stayed as a bare marker (the section structure a chunker sees)."""
    removals = [p for p in candidates if p.removal is not None]
    if not removals:  # kept whole (--keep-documents, or a method that removes nothing: llm)
        return {"removal": "none"}
    text_of = {d.doc_id: d.text for d in documents}
    markers = sum(1 for p in removals if p.removal.text)
    return {"removal": "candidates", "removed": len(removals),
            "removed_unit": MARKED_UNIT if markers else REMOVED_UNIT.get(method, "passages"),
            "documents": len(text_of), "documents_altered": sum(indexed[k] != v for k, v in text_of.items()),
            "characters": sum(len(v) for v in text_of.values()),
            "characters_removed": sum(len(v) - len(indexed[k]) for k, v in text_of.items()),
            "headings": sum(len(headings(v)) for v in text_of.values()),
            "headings_left": sum(len(headings(indexed[k])) for k in text_of), "markers": markers}


def corpus_words(record: dict | None) -> str:
    """A set's corpus record (``manifest.json``'s ``report.corpus``) in words: what the indexed documents lost, or
    "" when they are whole (or the set says nothing)."""
    if not record or record.get("removal") != "candidates":
        return ""
    lost = record["headings"] - record["headings_left"]
    share = f"{record['characters_removed'] / max(record['characters'], 1):.1%}"
    where = f"in {record['documents_altered']} of {record['documents']} documents"
    if record.get("markers"):
        return (f"the indexed copy lost the words of {lost} of its {record['headings']} markdown headings "
                f"({lost / max(record['headings'], 1):.0%}; every candidate question's, whatever the set's size), each "
                f"line kept as a bare '#' marker so every section keeps its place, and {share} of the characters, "
                f"{where}")
    headings_text = (f"{lost} of their {record['headings']} markdown headings ({lost / record['headings']:.0%})"
                     if record["headings"] else "no markdown headings (they had none)")
    return (f"the indexed copy lost {record['removed']} {record['removed_unit']} (every candidate question's, "
            f"whatever the set's size): {headings_text} and {share} of the characters, {where}")


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


def read_manifest(folder: Path) -> dict | None:
    """A generated set's manifest.json, or None when the folder holds no set kbench built."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and manifest.get("kind") == SET_KIND else None


def is_built_set(folder: Path) -> bool:
    return read_manifest(folder) is not None


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
