"""Runs and qrels in the formats other tools read: TREC run files, TREC qrels, ranx ``Run``/``Qrels``.

TREC run: one line per retrieved item, ``qid Q0 docid rank score tag``; TREC qrels: ``qid 0 docid grade``.
Tools such as trec_eval and ranx order a query's items by score (not by the rank column), so exported
scores are made strictly decreasing in kbench's order: an item whose score ties the one above it is
written a hair (1e-9) lower. A kbench run can be exported at two levels:

- ``doc``: each document at the rank of its best chunk, with that chunk's score; qrels are the dataset's
  document judgements (for span datasets: a document holding a reference span is relevant);
- ``chunk``: chunk ids (``<doc_id>#<n>``) with their scores; qrels mark every chunk that overlaps a reference
  span under the config's overlap rule (span datasets only).

``import_trec_run`` goes the other way: it scores a run file from another system on a config's dataset
with kbench's own document-level metrics and logs it like a kbench run, so ``kbench compare`` can test it
against kbench configs query by query.
"""
from __future__ import annotations

import hashlib
import math
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from kbench.records import Chunk, Hit

TIE_STEP = 1e-9


class TrecFormatError(ValueError):
    pass


# --------------------------------------------------------------------------- kbench rankings
def rankings_frame(chunks: list[Chunk], rankings: dict[str, list[Hit]]) -> pd.DataFrame:
    """One row per hit: query_id, rank (1-based), chunk_id, doc_id, score."""
    rows = [(qid, rank, chunks[h.chunk_index].chunk_id, chunks[h.chunk_index].doc_id, float(h.score))
            for qid, hits in rankings.items() for rank, h in enumerate(hits, start=1)]
    return pd.DataFrame(rows, columns=["query_id", "rank", "chunk_id", "doc_id", "score"])


def _strictly_decreasing(items: list[tuple[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    previous = math.inf
    for item_id, score in items:
        score = float(score) if score == score else -math.inf
        if score >= previous:
            score = previous - TIE_STEP * max(1.0, abs(previous))
        out[item_id] = score
        previous = score
    return out


def run_from_rankings(frame: pd.DataFrame, level: str = "doc") -> dict[str, dict[str, float]]:
    """A rankings frame -> ``{query_id: {id: score}}`` in kbench's order, scores strictly decreasing."""
    if level not in ("doc", "chunk"):
        raise ValueError(f"level: {level!r}; allowed: doc, chunk")
    run: dict[str, dict[str, float]] = {}
    for qid, group in frame.sort_values(["query_id", "rank"]).groupby("query_id", sort=False):
        column = "doc_id" if level == "doc" else "chunk_id"
        best = group.drop_duplicates(column, keep="first")  # a document at the rank of its best chunk
        run[str(qid)] = _strictly_decreasing(list(zip(best[column], best["score"])))
    return run


def run_from_per_query(per_query: pd.DataFrame, level: str = "doc") -> dict[str, dict[str, float]]:
    """Older run folders without rankings.parquet: the ``retrieved`` chunk ids, scored 1/rank."""
    rows = []
    for qid, retrieved in zip(per_query["query_id"], per_query["retrieved"]):
        for rank, chunk_id in enumerate(list(retrieved), start=1):
            rows.append((qid, rank, chunk_id, chunk_id.rsplit("#", 1)[0], 1.0 / rank))
    return run_from_rankings(pd.DataFrame(rows, columns=["query_id", "rank", "chunk_id", "doc_id", "score"]), level)


# --------------------------------------------------------------------------- TREC files
def _check_id(value: str, what: str) -> str:
    value = str(value)
    if not value or any(ch.isspace() for ch in value):
        raise TrecFormatError(f"{what} {value!r} is empty or holds whitespace, which TREC files cannot carry")
    return value


def write_trec_run(run: dict[str, dict[str, float]], path: str | Path, tag: str = "kbench") -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tag = _check_id(tag, "run tag")
    with path.open("w", encoding="utf-8") as f:
        for qid in sorted(run):
            items = sorted(run[qid].items(), key=lambda kv: -kv[1])
            for rank, (doc_id, score) in enumerate(items, start=1):
                f.write(f"{_check_id(qid, 'query id')} Q0 {_check_id(doc_id, 'document id')} {rank} {score!r} {tag}\n")
    return path


def read_trec_run(path: str | Path) -> tuple[dict[str, dict[str, float]], str]:
    """A TREC run file -> ``({qid: {docid: score}}, tag)``; every line must have 6 fields and a numeric score."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"TREC run file not found: {path}")
    run: dict[str, dict[str, float]] = {}
    tag = ""
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            parts = line.split()
            if len(parts) != 6:
                raise TrecFormatError(f"{path}:{n}: expected 6 fields 'qid Q0 docid rank score tag', got {len(parts)}")
            qid, _, doc_id, _, score, tag = parts
            try:
                value = float(score)
            except ValueError:
                raise TrecFormatError(f"{path}:{n}: score {score!r} is not a number") from None
            if doc_id in run.setdefault(qid, {}):
                raise TrecFormatError(f"{path}:{n}: document {doc_id!r} listed twice for query {qid!r}")
            run[qid][doc_id] = value
    if not run:
        raise TrecFormatError(f"{path}: no run lines")
    return run, tag


def write_trec_qrels(qrels: dict[str, dict[str, int]], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for qid in sorted(qrels):
            for doc_id, grade in sorted(qrels[qid].items()):
                f.write(f"{_check_id(qid, 'query id')} 0 {_check_id(doc_id, 'document id')} {int(grade)}\n")
    return path


def read_trec_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with Path(path).open(encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 4:
                raise TrecFormatError(f"{path}:{n}: expected 4 fields 'qid 0 docid grade', got {len(parts)}")
            qrels.setdefault(parts[0], {})[parts[2]] = int(parts[3])
    return qrels


def ranked_ids(scores: dict[str, float]) -> list[str]:
    """Best first, as trec_eval orders a run: score descending, ties by id descending."""
    return [d for d, _ in sorted(scores.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)]


# --------------------------------------------------------------------------- ranx
def to_ranx_run(run: dict[str, dict[str, float]], name: str = "kbench"):
    from ranx import Run

    return Run(run, name=name)


def to_ranx_qrels(qrels: dict[str, dict[str, int]]):
    from ranx import Qrels

    return Qrels({q: {d: int(g) for d, g in docs.items()} for q, docs in qrels.items() if docs})


# --------------------------------------------------------------------------- qrels of a kbench dataset
def chunk_qrels(dataset, chunks: list[Chunk], overlap) -> dict[str, dict[str, int]]:
    """Span datasets: every chunk that overlaps a reference span of a query is relevant (grade 1)."""
    from kbench.evaluation.relevance import relevant_chunks

    if not dataset.has_spans:
        raise ValueError("chunk-level qrels need a span dataset; this one has document qrels only (use level doc)")
    by_doc: dict[str, list[int]] = {}
    for i, c in enumerate(chunks):
        by_doc.setdefault(c.doc_id, []).append(i)
    return {q.query_id: {chunks[i].chunk_id: 1 for i in relevant_chunks(chunks, dataset.spans.get(q.query_id, []),
                                                                        overlap, by_doc)}
            for q in dataset.queries}


def doc_qrels(dataset) -> dict[str, dict[str, int]]:
    keep = {q.query_id for q in dataset.queries}
    return {q: dict(docs) for q, docs in dataset.qrels.items() if q in keep}


# --------------------------------------------------------------------------- logged runs
def export_run(run_id: str, out_dir: str | Path, level: str = "doc", tracking_uri: str | None = None) -> dict[str, Path]:
    """Write ``run.trec`` and ``qrels.txt`` for a logged kbench run (qrels rebuilt from its config's dataset)."""
    import yaml
    from mlflow.tracking import MlflowClient

    from kbench.config import validate_experiment
    from kbench.datasets import load_dataset
    from kbench.paths import workspace_dir
    from kbench.tracking.mlflow_run import tracking_uri as resolve_uri

    client = MlflowClient(tracking_uri=resolve_uri(tracking_uri, workspace_dir()))
    run = client.get_run(run_id)
    source = run.data.tags.get("kbench.sweep.reused_from") or run_id
    folder = Path(tempfile.mkdtemp(prefix="kbench-export-"))
    config = yaml.safe_load(Path(client.download_artifacts(source, "config.yaml", str(folder))).read_text())
    experiment = validate_experiment(config, f"run {source} config.yaml")
    try:
        frame = pd.read_parquet(client.download_artifacts(source, "rankings.parquet", str(folder)))
        ranking = run_from_rankings(frame, level)
    except Exception:  # logged before rankings.parquet existed
        ranking = run_from_per_query(pd.read_parquet(client.download_artifacts(source, "per_query.parquet",
                                                                               str(folder))), level)
    dataset = load_dataset(experiment.dataset)
    if level == "doc":
        qrels = doc_qrels(dataset)
    else:
        from kbench.chunking import chunk_corpus

        qrels = chunk_qrels(dataset, chunk_corpus(dataset.documents, experiment.chunking), experiment.evaluation.overlap)
    out = Path(out_dir)
    tag = "".join(ch if not ch.isspace() else "_" for ch in (run.data.tags.get("mlflow.runName") or source))
    return {"run": write_trec_run(ranking, out / "run.trec", tag), "qrels": write_trec_qrels(qrels, out / "qrels.txt")}


def score_trec_run(run: dict[str, dict[str, float]], dataset, ks: list[int]) -> pd.DataFrame:
    """kbench's document-level metrics for every query of ``dataset`` (a query missing from the run scores 0)."""
    from kbench.evaluation.evaluate import metric_row

    rows = []
    for query in dataset.queries:
        qrels = dataset.qrels.get(query.query_id, {})
        docs = ranked_ids(run.get(query.query_id, {}))
        row: dict[str, Any] = {"query_id": query.query_id, "n_results": len(docs)}
        row.update(metric_row([qrels.get(d, 0) for d in docs], [g for g in qrels.values() if g > 0], ks, "doc_"))
        row["retrieved"] = docs[: max(ks)]
        rows.append(row)
    return pd.DataFrame(rows)


def import_trec_run(path: str | Path, experiment, name: str | None = None, log: bool = True):
    """Score a TREC run file on ``experiment``'s dataset (document level) and log it as a kbench run.

    The run gets its own run key (a hash of the file), never the config's, so a sweep never mistakes it
    for a kbench computation of that config.
    """
    from kbench.datasets import load_dataset
    from kbench.evaluation.evaluate import summarize
    from kbench.paths import workspace_dir
    from kbench.runner import RunResult, log_to_mlflow, write_run_folder

    run, tag = read_trec_run(path)
    dataset = load_dataset(experiment.dataset)
    known = {q.query_id for q in dataset.queries}
    if not known & set(run):
        raise TrecFormatError(f"{path}: none of its {len(run)} query ids are queries of dataset {dataset.name!r} "
                              f"(e.g. {sorted(run)[:3]} vs {sorted(known)[:3]})")
    experiment = experiment.model_copy(deep=True)
    experiment.name = name or tag or Path(path).stem
    per_query = score_trec_run(run, dataset, experiment.evaluation.k)
    metrics = summarize(per_query)
    counts = {"queries": len(dataset.queries), "documents": len(dataset.documents),
              "run_queries_not_in_dataset": len(set(run) - known)}
    metrics.update({f"count_{k}": float(v) for k, v in counts.items()})
    workspace = workspace_dir(experiment.workspace)
    run_dir = write_run_folder(experiment, workspace, metrics, per_query, {}, counts)
    result = RunResult(experiment, metrics, per_query, {}, counts, run_dir, dataset=dataset)
    if log and experiment.tracking.enabled:
        digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
        log_to_mlflow(result, workspace, None, {"kbench.run_key": f"trec-{digest}", "kbench.imported_from": str(path)})
    return result
