"""Dataset names -> loaders, and the load step of a run (dropped data reported or refused, sampling,
empty-corpus checks)."""
from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from kbench.errors import shorten
from kbench.datasets.config import DatasetConfig
from kbench.datasets.beir import is_beir_folder, load_beir
from kbench.datasets.mlflow_questions import with_mlflow_questions
from kbench.datasets.reading import DatasetError, problems_summary
from kbench.datasets.spans import (doc_qrels_from_spans, is_chroma_folder, is_kbench_span_folder,
                                   load_chroma, load_kbench_spans)
from kbench.datasets.tables import is_autorag_folder, is_table_beir_folder, load_autorag, load_table_beir
from kbench.paths import REPO_ROOT, shared_datasets_dir
from kbench.sources.folder import FolderSource
from kbench.records import Dataset
from kbench.trace import StageTimer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DatasetEntry:
    name: str
    layout: str
    location: Callable[[], Path]
    description: str


DATASETS: dict[str, DatasetEntry] = {
    e.name: e
    for e in [
        DatasetEntry("demo", "spans", lambda: REPO_ROOT / "datasets" / "demo",
                     "kbench's demo knowledge base: product docs and SDK source, questions with char spans"),
        DatasetEntry("scifact", "beir", lambda: shared_datasets_dir() / "scifact",
                     "BEIR SciFact: 5,183 abstracts, 300 test claims with document qrels"),
        DatasetEntry("chroma_chunking", "spans", lambda: shared_datasets_dir() / "chroma_chunking",
                     "Chroma's chunking evaluation: 5 corpora, 472 questions with char spans"),
    ]
}


def resolve_dataset_path(config: DatasetConfig) -> tuple[Path, str]:
    if config.path:
        path = Path(config.path).expanduser()
        if not path.is_dir():
            raise DatasetError(f"dataset.path: {path} does not exist or is not a folder")
        return path.resolve(), config.name or path.name
    entry = DATASETS.get(config.name or "")
    if entry is None:
        raise DatasetError(
            f"dataset.name: unknown dataset {shorten(config.name)}; registered: {', '.join(DATASETS)} "
            "(or give dataset.path to a BEIR or span folder)"
        )
    path = entry.location()
    if not path.is_dir():
        raise DatasetError(f"dataset.name: {entry.name!r} should be at {path}, which does not exist "
                           "(set KBENCH_DATA_DIR to the folder holding the shared datasets)")
    return path, entry.name


def is_dataset_folder(path: Path) -> bool:
    """A folder in one of the layouts ``load_dataset`` reads (documents with questions and labels)."""
    return any(check(path) for check in (is_beir_folder, is_autorag_folder, is_table_beir_folder, is_chroma_folder,
                                         is_kbench_span_folder))


def load_dataset(config: DatasetConfig) -> Dataset:
    path, name = resolve_dataset_path(config)
    if is_beir_folder(path):
        dataset = load_beir(path, config.split, name)
    elif is_autorag_folder(path):
        dataset = load_autorag(path, name)
    elif is_table_beir_folder(path):
        dataset = load_table_beir(path, config.split, name)
    elif is_chroma_folder(path):
        dataset = load_chroma(path, name, corpora=config.subset)
    elif is_kbench_span_folder(path):
        dataset = load_kbench_spans(path, name, FolderSource.from_config(config, path / "docs"))
    else:
        raise DatasetError(
            f"{path}: not a dataset folder. Expected BEIR (corpus.jsonl, queries.jsonl, qrels/<split>.tsv), "
            "BEIR tables (corpus, queries, qrels/<split> as parquet or Hugging Face Arrow files), AutoRAG "
            "(corpus.parquet, qa.parquet), Chroma spans (corpora/*.md, questions_df.csv) or kbench spans "
            "(docs/, questions.jsonl)"
        )
    too_long = [d for d in dataset.documents if len(d.text) > config.max_document_chars]
    if too_long:
        biggest = max(too_long, key=lambda d: len(d.text))
        raise DatasetError(
            f"{path}: {len(too_long)} document(s) longer than dataset.max_document_chars ({config.max_document_chars:,} "
            f"characters), e.g. {biggest.doc_id!r} with {len(biggest.text):,}; split them, leave them out, or raise "
            "dataset.max_document_chars")
    if dataset.spans and not dataset.qrels:
        dataset.qrels = doc_qrels_from_spans(dataset.spans)
    if config.questions_from:  # the documents from the folder, the questions and labels from MLflow
        dataset = with_mlflow_questions(dataset, config.questions_from, config.questions_tracking_uri)
    dropped = problems_summary(dataset.skipped)
    if dropped and config.strict:
        raise DatasetError(f"{path}: dataset.strict refuses {dropped}; fix the data or set dataset.strict: false "
                           "to drop these and count them in the run")
    if dropped:
        log.warning("dataset %s: left out %s; counted in the run as count_skipped_<reason> "
                    "(dataset.strict: true refuses them)", name, dropped)
    known_documents = {d.doc_id for d in dataset.documents} | {d for docs in dataset.qrels.values() for d in docs}
    dataset = sample(dataset, config)
    if config.judged_qrels:  # after sampling: the corpus stays the one the judged runs searched
        judged = read_judged_qrels(Path(config.judged_qrels))
        kept = {q.query_id for q in dataset.queries}
        check_judged_qrels_match(Path(config.judged_qrels), judged, kept, known_documents, dataset.name)
        dataset.qrels = merge_judged_qrels(dataset.qrels, {q: d for q, d in judged.items() if q in kept},
                                           config.judged_qrels_use)
    if not any(d.text.strip() for d in dataset.documents):
        raise DatasetError(f"{path}: the corpus is empty (no document has text); nothing to index")
    if not dataset.queries:
        raise DatasetError(f"{path}: no queries with judgements (split {config.split!r}); nothing to evaluate")
    unlabelled = unlabelled_questions(dataset)
    if unlabelled:
        scored = (f"scored on the {len(dataset.queries) - len(unlabelled)} that do" if len(unlabelled) < len(dataset.queries)
                  else "nothing is scored yet; the runs keep their rankings")
        log.warning("dataset %s: %d of %d questions carry no label yet (a query log's): they are ranked and left out "
                    "of the metrics, never scored 0; %s. Label them: kbench judge RUN... --out Q, then "
                    "dataset.judged_qrels=Q; or kbench label", name, len(unlabelled), len(dataset.queries), scored)
    return dataset


def unlabelled_questions(dataset: Dataset) -> list[str]:
    """The questions no label reaches (no qrels, no spans): a query log's until ``kbench judge`` or ``kbench label``
    labels them; runs rank them and leave them out of their metrics (kbench/evaluation/stage.py)."""
    return [q.query_id for q in dataset.queries if q.query_id not in dataset.qrels and q.query_id not in dataset.spans]


def read_dataset(config: DatasetConfig, *, timer: StageTimer | None = None,
                 counts: dict[str, int] | None = None) -> Dataset:
    """``load_dataset``, timed as stage ``load``; ``counts`` receives documents, queries and skipped files by
    reason (``count_*`` in MLflow)."""
    timer = timer or StageTimer()
    counts = {} if counts is None else counts
    with timer.stage("load"):
        loaded = load_dataset(config)
    counts.update(documents=len(loaded.documents), queries=len(loaded.queries))
    if unlabelled := unlabelled_questions(loaded):
        counts["unlabelled"] = len(unlabelled)
    counts.update({f"skipped_{reason}": len(paths) for reason, paths in loaded.skipped.items()})
    return loaded


def read_judged_qrels(path: Path) -> dict[str, dict[str, int]]:
    """``kbench judge`` output: ``qid 0 docid grade`` per line; grade 0 is kept (judged, not relevant)."""
    if not path.expanduser().is_file():
        raise DatasetError(f"dataset.judged_qrels: {path} is not a file; give the --out of `kbench judge`")
    qrels: dict[str, dict[str, int]] = {}
    try:
        text = path.expanduser().read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise DatasetError(f"dataset.judged_qrels: {path} is not UTF-8 text (a binary file?); give the --out of "
                           "`kbench judge`") from None
    for n, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 4 or not parts[3].lstrip("-").isdigit():  # never quoted: the path may name any file
            got = "a grade that is not a whole number" if len(parts) == 4 else f"{len(parts)} fields"
            raise DatasetError(f"dataset.judged_qrels: {path}:{n}: expected 'qid 0 docid grade' (a whole-number "
                               f"grade), got {got}; give the --out of `kbench judge`")
        qrels.setdefault(parts[0], {})[parts[2]] = int(parts[3])
    check_judged_qrels(path, qrels)
    return qrels


JUDGED_GRADES = (0, 1, 2, 3)  # the scale `kbench judge` grades on (kbench/judging/prompt.py GRADES)


def check_judged_qrels(path: Path, qrels: dict[str, dict[str, int]]) -> None:
    """Judged qrels are judgements on the judge's scale: an empty file (what a failed judge could leave) and a
    grade outside 0-3 (99 would dominate graded nDCG) are refused."""
    if not qrels:
        raise DatasetError(f"dataset.judged_qrels: {path} holds no judgement; every document would count as not "
                           "relevant. Judge again (kbench judge RUN... --out QRELS) or leave dataset.judged_qrels unset")
    bad = sorted({(g, q, d) for q, docs in qrels.items() for d, g in docs.items() if g not in JUDGED_GRADES})
    if bad:
        grade, q, d = bad[0]
        raise DatasetError(f"dataset.judged_qrels: {path}: {len(bad)} grade(s) outside the judge's scale "
                           f"{JUDGED_GRADES[0]}-{JUDGED_GRADES[-1]}, e.g. {grade} for question {q!r}; grades are "
                           "what `kbench judge` writes (0 not relevant ... 3 holds the answer)")


def check_judged_qrels_match(path: Path, judged: dict[str, dict[str, int]], questions: set[str],
                             documents: set[str], dataset_name: str) -> None:
    """Judged qrels naming no question of the (sampled) dataset, or only documents it does not have, would
    score every run 0 (``instead``) or change nothing (``beside``) without a word: refused."""
    pairs = sum(len(docs) for docs in judged.values())
    on_questions = {q: docs for q, docs in judged.items() if q in questions}
    matching = sum(1 for docs in on_questions.values() for d in docs if d in documents)
    if not matching:
        why = (f"none of its {len(judged)} question ids is a question of dataset {dataset_name!r} "
               f"({len(questions)} questions after sampling)" if not on_questions else
               f"none of the documents it grades for this dataset's questions is a document of {dataset_name!r}")
        raise DatasetError(f"dataset.judged_qrels: {path}: {pairs} judgements, but {why}; judged on another "
                           "dataset or sample? Judge this dataset's runs (kbench judge RUN... --out QRELS)")


def merge_judged_qrels(own: dict[str, dict[str, int]], judged: dict[str, dict[str, int]],
                       use: str) -> dict[str, dict[str, int]]:
    if use == "instead":
        return {q: dict(docs) for q, docs in judged.items()}
    merged = {q: dict(docs) for q, docs in own.items()}
    for q, docs in judged.items():
        for d, g in docs.items():
            merged.setdefault(q, {}).setdefault(d, g)  # the dataset's own label wins
    return merged


def sample(dataset: Dataset, config: DatasetConfig) -> Dataset:
    """Seeded subsets: ``max_queries`` queries; ``max_documents`` keeps every judged document first."""
    rng = random.Random(config.seed)
    queries = dataset.queries
    if config.max_queries and len(queries) > config.max_queries:
        queries = sorted(rng.sample(queries, config.max_queries), key=lambda q: q.query_id)
    keep_q = {q.query_id for q in queries}
    documents = dataset.documents
    if config.max_documents and len(documents) > config.max_documents:
        judged = {d for q in keep_q for d in dataset.qrels.get(q, {})}
        must = [d for d in documents if d.doc_id in judged]
        rest = [d for d in documents if d.doc_id not in judged]
        extra = rng.sample(rest, max(0, config.max_documents - len(must)))
        chosen = {d.doc_id for d in must + extra}
        documents = [d for d in documents if d.doc_id in chosen]
    sampled_from = {**({"documents": len(dataset.documents)} if len(documents) < len(dataset.documents) else {}),
                    **({"queries": len(dataset.queries)} if len(queries) < len(dataset.queries) else {})}
    return Dataset(
        dataset.name, documents, queries,
        qrels={q: r for q, r in dataset.qrels.items() if q in keep_q},
        spans={q: r for q, r in dataset.spans.items() if q in keep_q},
        skipped=dataset.skipped, sampled_from=sampled_from,
    )
