"""What a run folder keeps for its MLflow export beyond the scores: the question set, what each retrieval stage
passed on, and the prompts of its LLM stages. The export (kbench.tracking.mlflow_export) reads only these files,
so re-exporting a folder to a fresh store needs nothing else.

- ``dataset.json``: the question set's identity (name, content digest, source: a registered name, a folder, or a
  generated set with its method, model and prompt hash) and every question with its labels (document grades,
  reference spans with their text).
- ``candidates.parquet``: per traced question (``tracking.traces``: all up to a cap, a seeded sample beyond), the
  first ``tracking.traces.max_documents`` of each stage's list (``leg_<name>``, ``fusion``, ``rerank``:
  ``Run.stages``) and of the run's ranking (``final``), with each unit's document, offsets, score where the run
  recorded it, and text (what MLflow's retrieval judges read); one row per (question, stage, rank).
- ``rankings.parquet`` (written by the run folder) also carries each hit's offsets, match type and per-leg ranks
  and scores (JSON), which ``ranked_hits`` reads back into ``RankedHit``s.
- ``prompts.json``: the prompt template of each LLM stage the config turns on, by its Prompt Registry name.
"""
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pandas as pd

from kbench.datasets.reading import DatasetError
from kbench.datasets.registry import resolve_dataset_path
from kbench.enrichment.code_examples import SUMMARY_PROMPT
from kbench.enrichment.contextual import CONTEXT_PROMPT
from kbench.hashing import sha256_text, stable_hash
from kbench.records import Chunk, Dataset, Passage, RankedHit, Run
from kbench.retrieval.query.prompts import DECOMPOSE_PROMPT, EXPAND_PROMPT, HYDE_PROMPT

DATASET_FILE = "dataset.json"
CANDIDATES_FILE = "candidates.parquet"
PROMPTS_FILE = "prompts.json"
REFERENCE_CHARS = 2000  # of a reference span's text kept in dataset.json (an expectation, not the document)
CANDIDATE_COLUMNS = ("query_id", "stage", "rank", "chunk_id", "doc_id", "start", "end", "score", "text", "leg_ranks")
FINAL = "final"  # the stage name of the run's own ranking in candidates.parquet
TEXT_CHARS = 2000  # of a unit's text kept in candidates.parquet


def traced_query_ids(query_ids: list[str], settings) -> list[str]:
    """The questions a run traces (``settings``: ``tracking.traces``): every one up to ``max_queries``, else a
    seeded sample of that many, in the run's order."""
    if not settings.enabled or settings.max_queries == 0:
        return []
    if len(query_ids) <= settings.max_queries:
        return list(query_ids)
    chosen = set(random.Random(settings.seed).sample(query_ids, settings.max_queries))
    return [q for q in query_ids if q in chosen]


# ---------------------------------------------------------------------------------------------- dataset.json

def dataset_source(dataset_config) -> dict[str, Any]:
    """Where the question set comes from: a registered name or a folder (with a generated set's method, model
    and prompt hash from its manifest), or a live store's rows."""
    try:
        path, name = resolve_dataset_path(dataset_config)
    except DatasetError:  # a live store gives the rows (store.backend live): no folder to name
        return {"type": "store", "name": dataset_config.name or ""}
    source: dict[str, Any] = {"type": "folder" if dataset_config.path else "registered", "name": name,
                              "path": str(path)}
    manifest = path / "manifest.json"
    if manifest.is_file():
        try:
            found = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            found = {}
        if found.get("kind") == "kbench synthetic set":
            source["type"] = "generated"
            source["generated"] = {k: found.get(k) for k in ("method", "model", "prompt_sha256", "seed")}
    if getattr(dataset_config, "questions_from", None):
        source["questions_from"] = dataset_config.questions_from
    return source


def sampled(dataset_config) -> str:
    """How the run sampled its dataset ("" when it kept all of it): part of the question set's name."""
    parts = [f"{key}={getattr(dataset_config, key)}" for key in ("max_queries", "max_documents")
             if getattr(dataset_config, key) is not None]
    return f"[{', '.join(parts)}, seed={dataset_config.seed}]" if parts else ""


def expected_context(dataset: Dataset, query_id: str) -> list[dict[str, Any]]:
    """A question's labels as MLflow's ``expected_retrieved_context``: each reference span (document, offsets,
    its text) or, for document qrels, each relevant document with its grade."""
    if dataset.spans.get(query_id):
        texts = {d.doc_id: d.text for d in dataset.documents}
        return [{"doc_uri": s.doc_id, "start": s.start, "end": s.end,
                 "content": texts.get(s.doc_id, "")[s.start:s.end][:REFERENCE_CHARS]}
                for s in dataset.spans[query_id]]
    return [{"doc_uri": doc_id, "grade": grade} for doc_id, grade in sorted(dataset.qrels.get(query_id, {}).items())
            if grade > 0]


def dataset_record(dataset: Dataset, dataset_config, content_hash: str) -> dict[str, Any]:
    """``dataset.json``: the question set's name, digest, source, counts and questions with their labels. The
    digest is the dataset's content hash; a sampled set hashes that with the question ids it kept."""
    query_ids = [q.query_id for q in dataset.queries]
    suffix = sampled(dataset_config)
    digest = stable_hash({"content": content_hash, "questions": query_ids}) if suffix else content_hash
    return {
        "name": f"{dataset.name}{suffix}",
        "dataset": dataset.name,
        "digest": digest,
        "content_hash": content_hash,
        "source": dataset_source(dataset_config),
        "labels": "spans" if dataset.has_spans else "qrels",
        "documents": len(dataset.documents),
        "questions": [{"query_id": q.query_id, "question": q.text,
                       "expected": expected_context(dataset, q.query_id)} for q in dataset.queries],
    }


def write_dataset_record(folder: Path, record: dict[str, Any]) -> None:
    (folder / DATASET_FILE).write_text(json.dumps(record, ensure_ascii=False, indent=1), encoding="utf-8")


def read_dataset_record(run_dir: Path) -> dict[str, Any] | None:
    path = Path(run_dir) / DATASET_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


# ------------------------------------------------------------------------------------ rankings and candidates

def rankings_frame(run: Run) -> pd.DataFrame:
    """``rankings.parquet``: ``Run.to_frame()`` plus each hit's offsets, match type, per-leg ranks and scores
    (JSON text) and, in multi-unit runs, each leg's best passage."""
    rows = []
    for qid, hits in run.hits.items():
        for rank, h in enumerate(hits, start=1):
            rows.append((qid, rank, h.chunk_id, h.doc_id, h.score, h.start, h.end, h.match_type,
                         json.dumps(h.leg_ranks), json.dumps(h.leg_scores),
                         json.dumps({leg: [p.unit_id, p.start, p.end] for leg, p in h.passages.items()})))
    return pd.DataFrame(rows, columns=[*Run.FRAME_COLUMNS, "start", "end", "match_type", "leg_ranks", "leg_scores",
                                       "passages"])


def ranked_hits(frame: pd.DataFrame, name: str = "kbench") -> Run:
    """A ``rankings_frame`` back to a Run with every hit's evidence; an older file (five columns) reads as
    ``Run.from_frame`` does."""
    if "leg_ranks" not in frame.columns:
        return Run.from_frame(frame, name)
    hits: dict[str, list[RankedHit]] = {}
    for row in frame.sort_values(["query_id", "rank"], kind="stable").itertuples(index=False):
        passages = {leg: Passage(*p) for leg, p in json.loads(row.passages).items()}
        hits.setdefault(str(row.query_id), []).append(RankedHit(
            str(row.chunk_id), str(row.doc_id), float(row.score), int(row.start), int(row.end),
            json.loads(row.leg_scores), json.loads(row.leg_ranks), str(row.match_type), passages))
    return Run(hits, name)


def candidates_frame(run: Run, units: list[Chunk], query_ids: list[str], max_documents: int) -> pd.DataFrame:
    """``candidates.parquet`` for ``query_ids``: the first ``max_documents`` of each stage's list (``Run.stages``)
    and of the ranking (``final``), with each unit's document, offsets, text (``units``: what the run's ids name,
    ``RunResult.chunks``) and score: the hit's own in ``final`` (with its rank in each leg, JSON), a leg's score for
    a unit the run kept, else none."""
    by_id = {c.chunk_id: c for c in units}
    rows = []
    for qid in query_ids:
        kept = {h.chunk_id: h for h in run.hits.get(qid, [])}
        lists = {**run.stages.get(qid, {}), FINAL: [h.chunk_id for h in run.hits.get(qid, [])]}
        for stage, ids in lists.items():
            leg = stage.removeprefix("leg_") if stage.startswith("leg_") else None
            for rank, chunk_id in enumerate(ids[:max_documents], start=1):
                unit, hit = by_id.get(chunk_id), kept.get(chunk_id)
                if stage == FINAL:
                    score, leg_ranks = hit.score, json.dumps(hit.leg_ranks) if hit.leg_ranks else ""
                else:
                    score = hit.leg_scores.get(leg) if hit is not None and leg is not None else None
                    leg_ranks = ""
                rows.append((qid, stage, rank, chunk_id, unit.doc_id if unit else chunk_id.rsplit("#", 1)[0],
                             unit.start if unit else 0, unit.end if unit else 0, score,
                             unit.text[:TEXT_CHARS] if unit else "", leg_ranks))
    return pd.DataFrame(rows, columns=list(CANDIDATE_COLUMNS))


def read_candidates(run_dir: Path) -> pd.DataFrame:
    path = Path(run_dir) / CANDIDATES_FILE
    return pd.read_parquet(path) if path.is_file() else pd.DataFrame(columns=list(CANDIDATE_COLUMNS))


# -------------------------------------------------------------------------------------------------- prompts

def stage_prompts(experiment) -> dict[str, dict[str, str]]:
    """Registry name -> {template, stage, model, sha256} for each LLM stage ``experiment`` turns on (query
    rewriting, HyDE, contextual enrichment, code-example summaries)."""
    found: dict[str, tuple[str, str, str | None]] = {}
    query = experiment.query
    if query.expansion.enabled and query.expansion.strategy == "llm":
        found["kbench-query-expansion"] = (EXPAND_PROMPT, "query.expansion", query.expansion.model)
    if query.decomposition.enabled:
        found["kbench-query-decomposition"] = (DECOMPOSE_PROMPT, "query.decomposition", query.decomposition.model)
    if query.hyde.enabled:
        found["kbench-query-hyde"] = (HYDE_PROMPT, "query.hyde", query.hyde.model)
    enrichment = experiment.enrichment
    if enrichment.enabled:
        found["kbench-contextual-enrichment"] = (CONTEXT_PROMPT, "enrichment", enrichment.model)
    if enrichment.code_examples.enabled and enrichment.code_examples.summary != "none":
        found["kbench-code-example-summary"] = (SUMMARY_PROMPT, "enrichment.code_examples",
                                                enrichment.code_examples.model)
    return {name: {"template": text, "stage": stage, "model": model or "", "sha256": sha256_text(text)}
            for name, (text, stage, model) in found.items()}


def write_prompts(folder: Path, prompts: dict[str, dict[str, str]]) -> None:
    if prompts:
        (folder / PROMPTS_FILE).write_text(json.dumps(prompts, indent=1), encoding="utf-8")


def read_prompts(run_dir: Path) -> dict[str, dict[str, str]]:
    path = Path(run_dir) / PROMPTS_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
