"""Where ``--until-decided`` takes its further questions: every question the documents of a generated set give.

    source = question_source(plan.baseline.dataset, workspace)
    source.path       # the folder to score on: the set grown to every question its documents give, or the set itself
    source.first      # the questions of the first look (the set's own, when it was grown)
    source.ordered    # True: ask the questions in the set's order (a generated set's: spread over documents)

A set built by ``kbench datasets build synthetic`` with ``--max`` is the first questions of all its candidates (the
generator samples its candidates in one seeded order spread over the documents, and the indexed copy is the same
whatever the number: ``datasets/synthetic/build.py``; ``--per-doc N`` keeps the first N rounds of that order over the
documents, a prefix too). Grown, it is built again from the same source with the same method, seed and options and
neither ``--max`` nor ``--per-doc``, under ``<workspace>/sets/grown-<hash>``, and checked: the same source
documents (their hashes in the manifest) and byte-identical indexed documents, so the questions added come from the
corpus the first ones were asked of. Any other set (real questions, an ``llm`` set, which would need the model
server) gives its own questions only, in a seeded order.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from kbench.datasets.config import DatasetConfig
from kbench.datasets.synthetic import METHODS, SyntheticError, build_from_source
from kbench.datasets.synthetic.build import Filters, read_manifest
from kbench.errors import UserError
from kbench.hashing import stable_hash


class GrowError(UserError, ValueError):
    pass


@dataclass(frozen=True)
class QuestionSource:
    path: str | None  # the dataset folder to score on (None: the config's own dataset)
    first: int | None  # questions of the first look (None: the search's default)
    ordered: bool  # ask in the set's order (a generated set) rather than a seeded shuffle
    words: str  # where the questions come from, for the lines


def _documents(folder: Path) -> dict[str, bytes]:
    docs = folder / "docs"
    return {p.relative_to(docs).as_posix(): p.read_bytes() for p in docs.rglob("*") if p.is_file()}


def question_source(dataset: DatasetConfig, workspace: Path) -> QuestionSource:
    """The questions ``--until-decided`` asks, for a config's dataset section."""
    folder = Path(dataset.path).expanduser() if dataset.path else None
    manifest = read_manifest(folder) if folder is not None else None
    if manifest is None:
        where = dataset.path or dataset.name
        return QuestionSource(None, None, False, f"the questions of {where} in a seeded order (no more can be "
                                                 "generated: it is no generated set)")
    count = len(_questions(folder))
    method = manifest.get("method")
    if method not in METHODS or manifest.get("max_questions") is None:
        why = ("it holds every question its documents give" if manifest.get("max_questions") is None
               else f"a {method} set is asked of a model, which --until-decided does not start")
        return QuestionSource(None, None, True, f"the {count} questions of {folder}, in its order ({why})")
    source = manifest.get("source") or {}
    location = source.get("path") or source.get("name")
    if not location:
        raise GrowError(f"{folder}/manifest.json names no source to generate more questions from; build the set again "
                        "with kbench datasets build synthetic")
    # every candidate: --per-doc N kept its first N rounds over the documents, so the set is its first questions too
    options = {k: manifest.get(k) for k in ("method", "seed", "filters", "params", "keep_documents")}
    grown = workspace / "sets" / f"grown-{stable_hash({'source': source, 'options': options}, 16)}"
    if read_manifest(grown) is None:
        try:
            build_from_source(str(location), grown, method=method, seed=manifest.get("seed", 0),
                              per_doc=None, max_questions=None,
                              filters=Filters(**(manifest.get("filters") or {})), force=grown.exists(),
                              include=source.get("include"), exclude=source.get("exclude"),
                              since=source.get("since"), max_commits=source.get("max_commits"),
                              params=manifest.get("params"), keep_documents=bool(manifest.get("keep_documents")))
        except SyntheticError as e:
            raise GrowError(f"generating more questions for {folder} from {location}: {e}") from None
    changed = _changed(manifest, read_manifest(grown) or {}, folder, grown)
    if changed:
        raise GrowError(f"{folder}: {changed}, so more questions from its source would be asked of another corpus; "
                        f"build the set again (kbench datasets build synthetic {location} --method {method} --out "
                        f"{folder} --force ...) and run the sweep on it")
    total = len(_questions(grown))
    return QuestionSource(str(grown), count, True,
                          f"the {count} questions of {folder}, then up to {total - count} more its documents give "
                          f"({method}, seed {manifest.get('seed', 0)}; the same indexed documents), in the "
                          f"generator's order, spread over the documents")


def _changed(manifest: dict, grown: dict, folder: Path, grown_folder: Path) -> str:
    """Why the grown set is not the set's continuation ("" when it is)."""
    before, after = manifest.get("source_hashes") or {}, grown.get("source_hashes") or {}
    if before != after:
        differ = sum(1 for k in set(before) | set(after) if before.get(k) != after.get(k))
        return f"{differ} of its source documents changed since it was built"
    if _documents(folder) != _documents(grown_folder):
        return ("its indexed documents differ from what the generator gives now (a set built before kbench decided "
                "them from every candidate question)")
    own = _questions(folder)
    if _questions(grown_folder)[:len(own)] != own:
        return "its questions are not the first the generator gives now from these documents"
    return ""


def _questions(folder: Path) -> list[tuple[str, str]]:
    """(query id, question) of each line of the set's questions.jsonl."""
    rows = [json.loads(line) for line in (folder / "questions.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]
    return [(row["query_id"], row["question"]) for row in rows]
