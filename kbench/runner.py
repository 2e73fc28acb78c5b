"""Run one experiment: config -> dataset -> chunks -> vectors -> index -> rankings -> metrics -> MLflow.

Each stage is timed. Results are written to a run folder under the workspace *before* MLflow is
touched, so a tracking failure never loses finished results.
"""
from __future__ import annotations

import json
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from kbench.chunking import chunk_corpus
from kbench.config import Experiment
from kbench.datasets import load_dataset
from kbench.evaluation.evaluate import evaluate_rankings, summarize
from kbench.paths import workspace_dir
from kbench.records import Chunk, Dataset, Hit
from kbench.retrieval.registry import LEGS, SearchContext
from kbench.retrieval.run import search
from kbench.store.stage import index_recall, needs_recall_check, prepare_store


class RunError(RuntimeError):
    pass


@dataclass
class RunResult:
    experiment: Experiment
    metrics: dict[str, float]
    per_query: pd.DataFrame
    stage_seconds: dict[str, float]
    counts: dict[str, int]
    run_dir: Path
    run_id: str | None = None
    tracking_uri: str | None = None
    chunks: list[Chunk] = field(default_factory=list, repr=False)
    dataset: Dataset | None = field(default=None, repr=False)
    rankings: dict[str, list[Hit]] = field(default_factory=dict, repr=False)  # query_id -> hits, best first


class StageTimer:
    def __init__(self):
        self.seconds: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str):
        t = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t


def needs_vectors(experiment: Experiment) -> bool:
    return any(getattr(LEGS.get(leg).impl, "needs_query_vectors", False) for leg in experiment.retrieval.legs)


def latency_summary(latency_ms: dict[str, np.ndarray]) -> dict[str, float]:
    out = {}
    for stage, values in latency_ms.items():
        out[f"latency_ms_{stage}_p50"] = float(np.percentile(values, 50))
        out[f"latency_ms_{stage}_p95"] = float(np.percentile(values, 95))
    return out


def preflight_llm_and_rerank(experiment: Experiment) -> None:
    from kbench.enrichment import check_enrichment
    from kbench.retrieval.rerank import check_reranker

    check_enrichment(experiment.enrichment)
    check_reranker(experiment.rerank)


def texts_to_embed(experiment: Experiment, dataset: Dataset, chunks: list[Chunk], workspace: Path,
                   timer: StageTimer, counts: dict[str, int]) -> list[str]:
    """Chunk texts, or with enrichment on, LLM context + "\\n---\\n" + chunk (kbench.enrichment)."""
    if not experiment.enrichment.enabled:
        return [c.text for c in chunks]
    from kbench.enrichment import enrich_chunks

    with timer.stage("enrich"):
        enriched = enrich_chunks(chunks, dataset.documents, experiment.enrichment, workspace / "cache")
    counts.update(enriched.counts())
    return enriched.texts


def run_experiment(experiment: Experiment, *, progress: bool = True, log: bool = True,
                   parent_run_id: str | None = None, extra_tags: dict[str, str] | None = None) -> RunResult:
    workspace = workspace_dir(experiment.workspace)
    timer = StageTimer()
    counts: dict[str, int] = {}
    preflight_llm_and_rerank(experiment)  # a missing endpoint, key or reranker fails here, before any work

    with timer.stage("load"):
        dataset = load_dataset(experiment.dataset)
    counts.update(documents=len(dataset.documents), queries=len(dataset.queries))
    for reason, paths in dataset.skipped.items():
        counts[f"skipped_{reason}"] = len(paths)

    chunk_stats: dict[str, int] = {}
    with timer.stage("chunk"):
        chunks = chunk_corpus(dataset.documents, experiment.chunking, cache_dir=workspace / "cache", stats=chunk_stats)
    counts.update(chunk_stats)  # chunk_cache_hits / chunk_cache_misses, in documents
    if not chunks:
        raise RunError(f"chunking.strategy {experiment.chunking.strategy!r} produced no chunks from "
                       f"{len(dataset.documents)} documents; check the dataset and the chunker's knobs")
    counts["chunks"] = len(chunks)

    context = SearchContext(chunks=chunks, workspace=workspace)
    stored = None
    store_metrics: dict[str, float] = {}
    if needs_vectors(experiment):
        from kbench.embedding.run import CachedEmbedder

        with timer.stage("load_model"):
            embedder = CachedEmbedder(experiment.embedding, workspace / "cache")
        texts = texts_to_embed(experiment, dataset, chunks, workspace, timer, counts)
        with timer.stage("embed"):
            embedded = embedder.embed(texts, progress=progress)
        counts.update(embeddings_computed=embedded.cache_misses, embeddings_cached=embedded.cache_hits,
                      embeddings_failed=len(embedded.failed))
        with timer.stage("store"):  # kbench.store.stage: faiss in memory, duckdb + saved FAISS, or pgvector
            stored = prepare_store(experiment, dataset, chunks, embedded, embedder, workspace)
            context.chunk_vectors = embedded.vectors
            context.vector_index = stored.vector_index
            context.extras.update(stored.extras)
            context.embed_queries = embedder.embed_queries
        counts.update(stored.counts)
        counts["embedding_dimension"] = int(embedded.vectors.shape[1])
        if needs_recall_check(experiment.store):
            with timer.stage("index_recall"):
                store_metrics = index_recall(stored, dataset.queries, embedder.embed_queries, experiment.store)

    try:
        with timer.stage("search"):
            output = search(dataset.queries, context, experiment.retrieval, experiment.rerank, progress=progress,
                            documents=dataset.documents)
    finally:
        if stored is not None:
            stored.close()  # pgvector: closes the connection and stops a server kbench started

    with timer.stage("evaluate"):
        per_query = evaluate_rankings(dataset, chunks, output.rankings, experiment.evaluation)
        for stage, values in output.latency_ms.items():
            per_query[f"latency_ms_{stage}"] = values
        metrics = summarize(per_query.drop(columns=[c for c in per_query if c.startswith("latency_ms_")]))
        metrics.update(latency_summary(output.latency_ms))

    metrics.update(store_metrics)
    metrics.update({f"count_{k}": float(v) for k, v in counts.items()})
    metrics.update({f"time_s_{k}": v for k, v in timer.seconds.items()})
    run_dir = write_run_folder(experiment, workspace, metrics, per_query, timer.seconds, counts)
    from kbench.tracking.export import rankings_frame  # scores per hit, for TREC/ranx export of logged runs

    rankings_frame(chunks, output.rankings).to_parquet(run_dir / "rankings.parquet", index=False)
    result = RunResult(experiment, metrics, per_query, dict(timer.seconds), counts, run_dir,
                       chunks=chunks, dataset=dataset, rankings=output.rankings)
    if log and experiment.tracking.enabled:
        log_to_mlflow(result, workspace, parent_run_id, extra_tags or {})
    return result


def write_run_folder(experiment: Experiment, workspace: Path, metrics: dict[str, float],
                     per_query: pd.DataFrame, stage_seconds: dict[str, float], counts: dict[str, int]) -> Path:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    run_dir = workspace / "runs" / f"{stamp}-{experiment.name}-{experiment.run_key()}"
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(experiment.resolved(), sort_keys=False), encoding="utf-8")
    (run_dir / "metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True), encoding="utf-8")
    (run_dir / "stages.json").write_text(json.dumps({"seconds": stage_seconds, "counts": counts}, indent=2),
                                         encoding="utf-8")
    per_query.to_parquet(run_dir / "per_query.parquet", index=False)
    return run_dir


def log_to_mlflow(result: RunResult, workspace: Path, parent_run_id: str | None, extra_tags: dict[str, str]) -> None:
    from kbench.tracking.mlflow_run import ensure_experiment, flatten, log_finished_run, mlflow_client

    experiment = result.experiment
    client = mlflow_client(experiment.tracking.tracking_uri, workspace)
    experiment_id = ensure_experiment(client, experiment.tracking.experiment, workspace)
    params = flatten({k: v for k, v in experiment.resolved().items() if k not in ("sweep", "variants")})
    tags = {"kbench.run_key": experiment.run_key(), "kbench.dataset": result.dataset.name if result.dataset else "",
            **experiment.tracking.tags, **extra_tags}
    result.run_id = log_finished_run(
        client=client, experiment_id=experiment_id, run_name=experiment.tracking.run_name or experiment.name,
        params=params, metrics=result.metrics, tags=tags, run_dir=result.run_dir, parent_run_id=parent_run_id,
    )
    result.tracking_uri = str(client.tracking_uri)
