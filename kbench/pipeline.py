"""The one pipeline: load -> chunk -> (enrich) -> build indexes -> search -> evaluate.

Everything that needs a searchable dataset comes through here: ``kbench run`` (kbench.runner), reranker training, TREC
import and the benchmarks. Each step is a plain function over plain records, so a benchmark can stop after
``chunked_dataset`` or ``prepare_corpus`` and time what it measures:

    corpus = prepare_corpus(experiment)          # the dataset and the indexes its legs search, timed and counted
    found = search_corpus(corpus, experiment)    # a Run (per query, ranked hits), latency per stage
    per_query, metrics = evaluate_run(corpus.dataset, found.units, found.run, experiment.evaluation)
    corpus.close()

``run_pipeline`` does the three in order and returns one ``PipelineResult``; it writes nothing. Each stage gets the
config sections it uses: the indexes (kbench/indexes) their ``IndexSections``, retrieval its own."""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from kbench.chunking import chunk_dataset, chunked_dataset
from kbench.config import Experiment
from kbench.datasets import read_dataset
from kbench.embedding.models import resolve_model_path
from kbench.embedding.registry import ReportingEncoder
from kbench.embedding.stage import CachedEmbedder, EmbeddingResult
from kbench.embedding.tuning import dataset_sample
from kbench.enrichment import check_code_examples, check_enrichment
from kbench.errors import ConfigError, RunError
from kbench.evaluation.budgets import budget_tokenizer
from kbench.evaluation.config import EvaluationConfig
from kbench.evaluation.ragas_eval import check_ragas, evaluate_ragas
from kbench.evaluation.slices import slice_problem
from kbench.evaluation.stage import evaluate_rankings, latency_summary, summarize
from kbench.indexes import CHUNK, BuildLog, Index, IndexSections, build_indexes, close_all, stored_index
from kbench.language.run import RunLanguages, language_census
from kbench.llm import LLMPolicy, UsageMeter, check_reachable
from kbench.packages import require
from kbench.paths import workspace_dir
from kbench.records import Chunk, Dataset, Run
from kbench.retrieval.context import check_budget_tokenizer, count_ranked_tokens, score_context
from kbench.retrieval.contracts import SearchContext
from kbench.retrieval.query import QueryPlan, check_query, plan_queries, search_planned
from kbench.retrieval.rerank import check_reranker
from kbench.retrieval.stage import check_legs, legs_need_query_vectors, search
from kbench.store.registry import STORED_CORPORA
from kbench.store.stage import check_store
from kbench.trace import StageTimer
from kbench.tracking.run_folder import check_workspace

__all__ = ["Corpus", "PipelineResult", "RunError", "SearchResult", "StageTimer", "chunk_dataset", "chunked_dataset",
           "evaluate_run", "preflight", "prepare_corpus", "read_dataset", "run_pipeline", "search_corpus"]


@dataclass
class Corpus:
    """A dataset made searchable: the indexes its legs search, by name (``chunk``: the run's chunks), the query
    encoder, and what preparing it took. ``close()`` releases the stores (a pgvector connection, a live store)."""

    dataset: Dataset
    indexes: dict[str, Index]
    context: SearchContext  # what every leg shares, over the run's chunks (kbench.retrieval.contracts)
    workspace: Path
    languages: RunLanguages  # the census and the embedder's coverage (kbench/language)
    embedder: CachedEmbedder | None = None
    timer: StageTimer = field(default_factory=StageTimer)
    counts: dict[str, int] = field(default_factory=dict)
    llm_usage: UsageMeter = field(default_factory=UsageMeter)  # every LLM/API request of the run, per stage

    @property
    def chunks(self) -> list[Chunk]:
        return self.indexes[CHUNK].units

    @property
    def embedded(self) -> EmbeddingResult | None:
        return self.indexes[CHUNK].embedded

    @property
    def metrics(self) -> dict[str, float]:  # the indexes' own measurements (a store index's recall)
        return {k: v for index in self.indexes.values() for k, v in index.metrics.items()}

    def llm_metrics(self, prices) -> dict[str, float]:
        """``llm_<stage>_<counter>`` for MLflow: the run's meter plus an API encoder's own."""
        usage = UsageMeter()
        usage.merge(self.llm_usage)
        if isinstance(self.embedder and self.embedder.encoder, ReportingEncoder):
            usage.merge(self.embedder.encoder.usage)
        return usage.metrics(prices)

    def close(self) -> None:
        close_all(self.indexes)


@dataclass
class SearchResult:
    run: Run
    latency_ms: dict[str, np.ndarray]  # stage -> per-query milliseconds, in the dataset's query order
    units: list[Chunk]  # what the run's hits point at: the run's chunks, or every leg's units end to end
    plan: QueryPlan | None = None  # what was searched per query, when query pre-stages are on
    seconds: dict[str, float] = field(default_factory=dict)  # query_rewrite, search
    counts: dict[str, int] = field(default_factory=dict)  # query rewriting's failures and unusable answers


@dataclass
class PipelineResult:
    """What one experiment computed: the run, its per-query scores and summary, and how each stage went."""

    dataset: Dataset
    chunks: list[Chunk]  # what the run's hits point at
    run: Run
    per_query: pd.DataFrame
    metrics: dict[str, float]
    counts: dict[str, int]
    stage_seconds: dict[str, float]
    tags: dict[str, str] = field(default_factory=dict)  # what the run says beside its metrics (the language census)


def preflight(experiment: Experiment) -> None:
    """A missing endpoint, key or model, a broken model folder, a damaged store file, a workspace that cannot be
    written, an LLM endpoint that does not connect or refuses its key, or a package the run imports that is missing
    or broken (FAISS, a stemmer's, py3langid's) fails here, before any work."""
    check_workspace(workspace_dir(experiment.workspace))
    check_legs(experiment.retrieval)
    endpoints = [*check_enrichment(experiment.enrichment), *check_code_examples(experiment.enrichment.code_examples),
                 *check_reranker(experiment.rerank)]
    if legs_need_query_vectors(experiment.retrieval):
        check_store(experiment.store, workspace_dir(experiment.workspace))
        if experiment.embedding.provider in ("sentence_transformers", "static"):  # missing or broken
            resolve_model_path(experiment.embedding.model)
    if experiment.evaluation.budgets:  # its tokenizer loads (a model with none fails now, not after the search)
        check_budget_tokenizer(experiment.evaluation.budget_tokenizer)
    endpoints += [*check_ragas(experiment.evaluation), *check_query(experiment.query)]
    check_reachable(endpoints, experiment.llm.policy)  # a dead server or a wrong key: seconds, not after embedding
    require(("py3langid",), "the language census every run takes (kbench/language)")


_noted: set[str] = set()


def sample_note(dataset: Dataset, config) -> str | None:
    """When ``dataset.max_documents`` (or max_queries) took a sample, one line that says so, why it matters and how
    to run on all of it: ``dataset docs: 30 of 155 documents (dataset.max_documents: 30 ...)``; None otherwise."""
    parts = []
    if "documents" in dataset.sampled_from:
        total = dataset.sampled_from["documents"]
        parts.append(f"{len(dataset.documents)} of {total} documents (dataset.max_documents: {config.max_documents}: "
                     "every document a question points at, then a seeded sample of the others); with fewer pages "
                     f"to search than the corpus has, every score runs higher than on all {total} and the ranking "
                     "of configs may differ: remove dataset.max_documents to run on all of them")
    if "queries" in dataset.sampled_from:
        parts.append(f"{len(dataset.queries)} of {dataset.sampled_from['queries']} questions (dataset.max_queries: "
                     f"{config.max_queries}, a seeded sample)")
    return f"dataset {dataset.name}: " + "; ".join(parts) if parts else None


def prepare_corpus(experiment: Experiment, *, progress: bool = True, index: bool = True) -> Corpus:
    """Load the dataset (or a live store's rows) and build every index the legs search (kbench/indexes).
    ``index=False`` stops after embedding the run's chunks (a benchmark that builds its own vector indexes)."""
    preflight(experiment)
    workspace, log = workspace_dir(experiment.workspace), BuildLog()
    sections = IndexSections(experiment.dataset, experiment.chunking, experiment.enrichment, experiment.embedding,
                             experiment.store, experiment.llm.policy)
    specs, _ = experiment.retrieval.index_specs()
    embedding, given = experiment.embedding, {}
    if experiment.store.backend in STORED_CORPORA.names():  # a live store: its rows are the run's chunk index
        with log.timer.stage("load"):
            stored = STORED_CORPORA.get(experiment.store.backend).impl(
                experiment.store, experiment.dataset, workspace, "vector" in experiment.retrieval.legs)
        dataset, embedding = stored.dataset, embedding.model_copy(update={"model": stored.embedding_model})
        log.counts.update(documents=len(dataset.documents), queries=len(dataset.queries), chunks=len(stored.chunks),
                          **stored.counts, **{f"skipped_{r}": len(p) for r, p in dataset.skipped.items()})
    else:
        stored, dataset = None, read_dataset(experiment.dataset, timer=log.timer, counts=log.counts)
        if "documents" in dataset.sampled_from:  # the results' header says "30 of 155 documents"
            log.counts["documents_total"] = dataset.sampled_from["documents"]
        if progress and (note := sample_note(dataset, experiment.dataset)) and note not in _noted:
            _noted.add(note)  # once per process: a sweep's configs read one sample
            print(f"kbench: note: {note}", file=sys.stderr, flush=True)
    if problem := slice_problem(dataset, experiment.evaluation.slices):  # the first moment the fields are known
        if stored is not None:
            stored.outcome.close()
        raise ConfigError(problem)
    try:
        embedder = None
        if any(spec.embed for spec in specs):
            with log.timer.stage("load_model"):  # exact or fast on a machine not tuned: tuned on this corpus first
                embedder = CachedEmbedder(embedding, workspace / "cache", sample=lambda: dataset_sample(dataset))
        if stored is not None:
            given[CHUNK] = stored_index(stored, dataset, sections, embedder, log)
        indexes = build_indexes(specs, dataset, sections, workspace=workspace, log=log, embedder=embedder,
                                given=given, keep=index, progress=progress)
    except BaseException:
        if stored is not None:
            stored.outcome.close()
        raise
    languages = language_census(dataset, experiment.embedding if embedder else None)  # untimed: no new metric
    context = SearchContext(chunks=indexes[CHUNK].units, embed_queries=embedder.embed_queries if embedder else None,
                            time_queries=embedder.time_queries if embedder else None,
                            workspace=workspace, llm_policy=experiment.llm.policy, llm_meter=log.meter,
                            doc_types={d.doc_id: d.doc_type for d in dataset.documents}).on(indexes[CHUNK])
    return Corpus(dataset, indexes, context, workspace, languages, embedder, log.timer, log.counts, log.meter)


def search_corpus(corpus: Corpus, experiment: Experiment, *, progress: bool = False,
                  name: str | None = None, legs: dict | None = None, rerankers: dict | None = None) -> SearchResult:
    """Every query of the corpus's dataset through the retrieval stage (query rewriting, legs, fusion, rerank,
    grouping); the corpus is read, never changed. ``legs`` (``retrieval.stage.build_legs``) and ``rerankers``: kept
    between searches of one corpus in batches, so a BM25 index is built and each reranker loaded once."""
    plan, timer, counts = None, StageTimer(), {}
    queries, documents = corpus.dataset.queries, corpus.dataset.documents
    if experiment.query.active:  # kbench.retrieval.query: expansion, decomposition, HyDE
        with timer.stage("query_rewrite"):
            plan = plan_queries(queries, experiment.query, corpus.workspace / "cache", policy=experiment.llm.policy,
                                meter=corpus.llm_usage)
        counts.update(query_rewrite_failures=plan.failures, query_rewrite_unusable=plan.unusable)
    with timer.stage("search"):
        if plan is None:
            output = search(queries, corpus.context, experiment.retrieval, experiment.rerank, legs=legs,
                            progress=progress, documents=documents, indexes=corpus.indexes, rerankers=rerankers)
        else:
            output = search_planned(queries, plan, corpus.context, experiment.retrieval, experiment.rerank,
                                    rrf_k=experiment.query.decomposition.rrf_k, progress=progress,
                                    documents=documents, indexes=corpus.indexes)
    units = output.units if output.units is not None else corpus.chunks  # legs on their own units: the catalog
    run = Run.from_hits(output.rankings, units, name=name or experiment.name, stages=output.stages)
    return SearchResult(run, output.latency_ms, units, plan, timer.seconds, counts)


def evaluate_run(dataset: Dataset, chunks: list[Chunk], run: Run, config: EvaluationConfig,
                 latency_ms: dict[str, np.ndarray] | None = None, *,
                 cache_root: Path | None = None, llm_usage: UsageMeter | None = None,
                 llm_policy: LLMPolicy | None = None) -> tuple[pd.DataFrame, dict[str, float]]:
    """Per-query metrics (plus ragas and latency columns) and their means (plus latency p50/p95). ``chunks``: what
    the hits point at (``SearchResult.units``); evaluation.budgets are counted by one tokenizer whatever the model
    (``evaluation.budgets.budget_tokenizer``). LLM-judged ragas metrics count requests in ``llm_usage``, wait as
    ``llm_policy`` says."""
    tokens = None
    if config.budgets:
        tokens = count_ranked_tokens(run, chunks, budget_tokenizer(config.budget_tokenizer))
    per_query = evaluate_rankings(dataset, chunks, run, config, tokens)
    # a question no label reaches has no row (kbench/evaluation/stage.py): per-question arrays follow the rows
    rows = pd.Index([q.query_id for q in dataset.queries]).get_indexer(per_query["query_id"])
    if config.ragas:
        ragas = evaluate_ragas(dataset, chunks, run, config, cache_root=cache_root, meter=llm_usage,
                               policy=llm_policy)
        for column in ragas.columns:
            per_query[column] = ragas[column].to_numpy()[rows]
    for stage, values in (latency_ms or {}).items():
        per_query[f"latency_ms_{stage}"] = np.asarray(values)[rows]
    metrics = summarize(per_query.drop(columns=[c for c in per_query if c.startswith("latency_ms_")]))
    metrics.update(latency_summary(latency_ms or {}))
    return per_query, metrics


def run_costs(corpus: Corpus) -> dict[str, float]:
    """``cost_*`` metrics for kbench compare --frontier/--cost: ``cost_index_bytes`` (the float32 vectors of the run's
    chunks: a flat index's size; 0 without a vector leg) and ``cost_embed_seconds`` (embedding them in this run)."""
    vectors = corpus.indexes[CHUNK].vectors
    return {"cost_index_bytes": float(vectors.nbytes if vectors is not None else 0),
            "cost_embed_seconds": float(corpus.timer.seconds.get("embed", 0.0))}


def run_pipeline(experiment: Experiment, *, progress: bool = True,
                 on_corpus: Callable[[Corpus], None] | None = None) -> PipelineResult:
    """Prepare, search and evaluate one experiment; nothing is written. ``on_corpus`` sees the prepared corpus
    before the search (a benchmark that wants its vectors)."""
    corpus = prepare_corpus(experiment, progress=progress)
    try:
        if on_corpus is not None:
            on_corpus(corpus)
        found = search_corpus(corpus, experiment, progress=progress)
    finally:
        corpus.close()  # pgvector: closes the connection and stops a server kbench started
    timer, counts = corpus.timer, {**corpus.counts, **found.counts}
    timer.seconds.update(found.seconds)
    with timer.stage("evaluate"):
        per_query, metrics = evaluate_run(corpus.dataset, found.units, found.run, experiment.evaluation,
                                          found.latency_ms,
                                          cache_root=corpus.workspace / "cache", llm_usage=corpus.llm_usage,
                                          llm_policy=experiment.llm.policy)
    if found.plan is not None:  # what was searched, per query (a notebook shows it)
        per_query["query_searched"] = [found.plan.searched[q.query_id] for q in corpus.dataset.queries]
        per_query["query_rewrites"] = [json.dumps(found.plan.rewrites[q.query_id]) for q in corpus.dataset.queries]
    if experiment.context.enabled:
        with timer.stage("context"):
            columns = score_context(found.run, found.units, corpus.dataset, experiment.context, experiment.evaluation)
        for column, values in columns.items():
            per_query[column] = values
        metrics.update({c: float(np.mean(v)) if len(v) else 0.0 for c, v in columns.items()})
    corpus.languages.add_to(per_query, metrics, experiment.evaluation.slices)  # the language slice, coverage
    metrics.update({**corpus.metrics, **corpus.llm_metrics(experiment.llm.prices), **run_costs(corpus)})
    metrics.update({f"count_{k}": float(v) for k, v in counts.items()})
    metrics.update({f"time_s_{k}": v for k, v in timer.seconds.items()})
    return PipelineResult(corpus.dataset, found.units, found.run, per_query, metrics, counts, dict(timer.seconds),
                          corpus.languages.tags())
