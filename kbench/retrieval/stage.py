"""The search stage of a run: filters -> legs -> fusion -> rerank -> grouping, timed per query and stage.

Latency (``retrieval.latency``):
- ``per_query`` (default): each query goes through every stage alone, as one request to production
  would (one query embedding, one search per leg), and each stage is timed for that query. One untimed
  warm-up query runs first so model and index first-call costs do not land on a query.
- ``batch``: query embedding and leg searches run once over all queries (fastest for big sweeps); their
  per-query latency is the batch time divided by the number of queries, an amortized figure. The query
  vectors of a batch may come from the vector cache (the configs of a sweep embed their questions once), so
  ``embed_query`` is timed apart, the same way for every config: the first ``QUERY_TIMING`` questions encoded
  together by the encoder itself, never from the cache, after an untimed warm-up (``CachedEmbedder.time_queries``;
  an API encoder's own call is timed as it is). Fusion, rerank and grouping are per query in both modes.
Stages: ``embed_query`` (when a leg needs vectors), ``leg_<name>`` per leg, ``fusion``, ``rerank`` (when
on), ``grouping`` (when on) and ``total`` (their sum), in milliseconds per query.

Units (kbench/retrieval/units.py): each leg searches the index its unit names (``retrieval.leg_index``; the
run's chunks are the context's own, any other comes from ``indexes``, built by kbench/indexes). Legs sharing one
unit list fuse on its rows as always; legs on different units are lifted to documents (timed within
``fusion``), or with ``retrieval.fusion_level: unit`` fused as catalog rows (their units compete as they are);
the output's ``units`` are the catalog rows hits point at. Lifted legs return ``candidates_per_leg`` of the units
they search, or with ``retrieval.candidates_unit: fused`` as many as bring that many distinct documents
(``search_documents``). Nothing the search is given is changed.
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from kbench.errors import ConfigError
from kbench.hashing import stable_hash
from kbench.indexes import CHUNK, Index
from kbench.progress import track
from kbench.records import Chunk, Document, Hit, Query
from kbench.retrieval.config import RerankConfig, RetrievalConfig
from kbench.retrieval.contracts import FusionParams, Leg, LegResult, Reranker, SearchContext
from kbench.retrieval.filters import describe, drop_query_document, filter_mask
from kbench.retrieval.grouping import group_by_page
from kbench.retrieval.registry import FUSIONS, LEGS, RERANKERS
from kbench.retrieval.units import UnitCatalog, attach_passages, lift_to_documents


QUERY_TIMING = 64  # questions whose encoding times embed_query under retrieval.latency: batch


class SearchError(ConfigError):
    """A config that cannot search this dataset (e.g. filters that keep no chunk); the CLI prints it plainly."""


@dataclass
class SearchOutput:
    rankings: dict[str, list[Hit]]
    latency_ms: dict[str, np.ndarray] = field(default_factory=dict)  # stage -> per-query milliseconds
    stages: dict[str, dict[str, list[int]]] = field(default_factory=dict)  # query -> stage -> rows (trace_stages)
    units: list[Chunk] | None = None  # what hits' rows index when not the context's chunks (leg units)


def trace_stages(leg_results: dict[str, list[tuple[int, float]]], fused: list[Hit],
                 reranked: list[Hit] | None) -> dict[str, list[int]]:
    """What each stage passed on for one query, as chunk rows best first (Run.stages; miss attribution and
    the oracle ceilings read it): each leg's list at its depth, the fused candidates (before rerank and the
    top_k cut) and, with a reranker, its output (before grouping)."""
    out = {f"leg_{name}": [int(i) for i, _ in results] for name, results in leg_results.items()}
    out["fusion"] = [h.chunk_index for h in fused]
    if reranked is not None:
        out["rerank"] = [h.chunk_index for h in reranked]
    return out


def check_legs(config: RetrievalConfig) -> None:
    """Each leg's start-time check (``Leg.preflight``): a stemmer whose package does not import fails here, before
    any work, in one line."""
    for name in config.legs:
        LEGS.get(name).impl.preflight(LEGS.params(name, config.leg_knobs(name)))


def legs_need_query_vectors(config: RetrievalConfig) -> bool:
    """Whether any configured leg searches by query vector (then the corpus must be embedded and stored)."""
    return any(LEGS.get(name).impl.needs_query_vectors for name in config.legs)


def leg_contexts(context: SearchContext, config: RetrievalConfig,
                 indexes: Mapping[str, Index] | None = None) -> dict[str, SearchContext]:
    """Each leg's context: ``context`` itself for a leg on the run's chunks, else ``context`` over the index its
    unit names, which ``indexes`` must hold."""
    indexes = indexes or {}
    out = {}
    for name in config.legs:
        index = config.leg_index(name)
        if index == CHUNK:
            out[name] = context
        elif index in indexes:
            out[name] = context.on(indexes[index])
        else:
            raise SearchError(f"retrieval.leg_params.{name}.unit: {config.leg_unit(name).unit!r} needs the leg's "
                              "own index; build it with kbench.pipeline.prepare_corpus (kbench.indexes)")
    return out


def build_legs(contexts: dict[str, SearchContext], config: RetrievalConfig) -> dict[str, Leg]:
    """Each leg over its own context (``leg_contexts``)."""
    return {name: LEGS.get(name).impl(contexts[name], LEGS.params(name, config.leg_knobs(name)))
            for name in config.legs}


def leg_depth(config: RetrievalConfig, fusion_params: FusionParams, keep: int) -> int:
    """How many results each leg returns: candidates_per_leg (default top_k), or more when the fusion's
    SQL reads more per leg (archon_weighted: 2 x match_count) or a reranker wants more candidates."""
    return max(config.candidates_per_leg or config.top_k, keep, fusion_params.leg_depth(keep))


def search_documents(leg: Leg, queries: list[Query], vectors: np.ndarray | None, documents: int,
                     mask: np.ndarray | None, doc_of: list[int], offset: int, units: int) -> list[LegResult]:
    """Per query, the leg's ranking deep enough to hold ``documents`` distinct documents (``retrieval.
    candidates_unit: fused``), cut after the unit that brings the last of them: the leg is asked for
    ``documents`` units, then twice as many for the queries still short, until they have enough or the leg
    has nothing more (it returned fewer than asked, or every unit)."""
    out: list[LegResult] = [[] for _ in queries]
    pending, k = list(range(len(queries))), documents
    while pending:
        found = leg.search([queries[i] for i in pending], None if vectors is None else vectors[pending], k, mask)
        short = []
        for i, ranked in zip(pending, found):
            seen: set[int] = set()
            for cut, (row, _) in enumerate(ranked, start=1):
                seen.add(doc_of[offset + row])
                if len(seen) == documents:
                    ranked = ranked[:cut]
                    break
            out[i] = ranked
            if len(seen) < documents and len(ranked) == k < units:
                short.append(i)
        pending, k = short, min(2 * k, units)
    return out


def unreturned_scores(legs: dict[str, Leg], query: Query, vector: np.ndarray | None,
                      leg_results: dict[str, LegResult]) -> dict[str, dict[int, float]]:
    """Per leg, its own score (``Leg.score``) of each candidate another leg returned and it did not."""
    union = list(dict.fromkeys(row for ranked in leg_results.values() for row, _ in ranked))
    out = {}
    for name, leg in legs.items():
        returned = {row for row, _ in leg_results[name]}
        rows = np.array([row for row in union if row not in returned], dtype=np.int64)
        scores = leg.score([query], vector, [rows])[0] if len(rows) else []
        out[name] = {int(row): float(score) for row, score in zip(rows, scores)}
    return out


def built_reranker(context: SearchContext, rerank: RerankConfig, cache: dict | None) -> Reranker:
    """The rerank section's reranker on ``context``, from ``cache`` when one was built on the same units.
    Keyed by the identity of the unit list: the cached reranker holds that list, so the id cannot be reused."""
    key = (id(context.chunks), stable_hash(rerank.model_dump(mode="json")))
    if cache is not None and key in cache:
        return cache[key]
    reranker = RERANKERS.get(rerank.strategy).impl(context, rerank.params)
    if cache is not None:
        cache[key] = reranker
    return reranker


def search(queries: list[Query], context: SearchContext, config: RetrievalConfig,
           rerank: RerankConfig | None = None, legs: dict[str, Leg] | None = None,
           progress: bool = False, documents: list[Document] | None = None,
           indexes: Mapping[str, Index] | None = None, rerankers: dict | None = None) -> SearchOutput:
    """Rank chunks for every query; ``documents`` (the dataset's) give filters their fields; ``indexes`` (by
    name) the units of legs that do not search the run's chunks (``context``'s). ``rerankers``: a dict the
    caller keeps between searches of one corpus, so a search in batches loads its reranker's model once."""
    contexts = leg_contexts(context, config, indexes)
    unit_lists = {name: leg_context.chunks for name, leg_context in contexts.items()}
    context_chunks = context.chunks
    by_id = {d.doc_id: d for d in documents or []}
    masks: dict[int, np.ndarray | None] = {}  # id(unit list) -> its filter mask
    for units in unit_lists.values():
        if id(units) in masks:
            continue
        masks[id(units)] = mask = filter_mask(units, by_id, config.filters)
        if mask is not None and not mask.any():
            raise SearchError(
                f"retrieval.filters ({describe(config.filters)}) keep none of the {len(units)} chunks, "
                "so every query would return nothing; loosen the filters or check the dataset's source ids, "
                "doc types and metadata")
    leg_masks = {name: masks[id(units)] for name, units in unit_lists.items()}
    shared = len({id(units) for units in unit_lists.values()}) == 1
    catalog = None if shared else UnitCatalog.build(unit_lists)
    rows = next(iter(unit_lists.values())) if shared else catalog.rows  # what hits' chunk_index point at
    legs = legs or build_legs(contexts, config)
    if rows is not context.chunks:
        context = replace(context, chunks=rows)  # the reranker reads hits' passages from here
    fuse, fusion_params = FUSIONS.get(config.fusion.strategy).impl, config.fusion.params
    reranker, keep = None, config.top_k
    if rerank is not None and rerank.enabled:
        reranker = built_reranker(context, rerank, rerankers)
        keep = max(config.candidates_per_leg or config.top_k,
                   config.top_k * rerank.params.candidate_multiplier)
    depth = leg_depth(config, fusion_params, keep)
    if config.filters.exclude_query_document:  # the GWI spec: knn_search(k) -> exclude_same_file -> top
        keep = max(keep, config.candidates_per_leg or 0)
    needs_vectors = any(leg.needs_query_vectors for leg in legs.values())
    by_document = catalog is not None and config.fusion_level == "document" and config.candidates_unit == "fused"

    n = len(queries)
    stages = (["embed_query"] if needs_vectors else []) + [f"leg_{name}" for name in legs] + ["fusion"]
    stages += (["rerank"] if reranker is not None else []) + (["grouping"] if config.grouping.enabled else [])
    latency = {stage: np.zeros(n) for stage in stages}

    def first_stage(batch: list[Query]) -> tuple[np.ndarray | None, dict[str, list], dict[str, float]]:
        """Embed and search ``batch``; returns vectors, per-leg results and the seconds each step took."""
        seconds: dict[str, float] = {}
        vectors = None
        if needs_vectors:
            t = time.perf_counter()
            vectors = context.embed_queries([q.text for q in batch])
            seconds["embed_query"] = time.perf_counter() - t
        results = {}
        for name, leg in legs.items():
            t = time.perf_counter()
            if by_document:  # candidates_unit fused: each leg brings `depth` documents to the fusion
                results[name] = search_documents(leg, batch, vectors, depth, leg_masks[name], catalog.doc_of,
                                                 catalog.offset[name], len(unit_lists[name]))
            else:
                results[name] = leg.search(batch, vectors, depth, leg_masks[name])
            seconds[f"leg_{name}"] = time.perf_counter() - t
        return vectors, results, seconds

    batch_results: dict[str, list] = {}
    batch_vectors = None
    if n and config.latency == "batch":
        batch_vectors, batch_results, seconds = first_stage(queries)
        for stage, s in seconds.items():
            latency[stage][:] = s * 1000 / n
        timed = context.time_queries([q.text for q in queries[:QUERY_TIMING]]) \
            if needs_vectors and context.time_queries is not None else None
        if timed is not None:  # the vectors above may come from the vector cache (an earlier config of a sweep
            latency["embed_query"][:] = timed * 1000  # embedded them): time the encoding itself, as every config
    elif n:
        first_stage(queries[:1])  # warm-up, untimed

    if reranker is not None:
        reranker.start(n)
    iterator = track(enumerate(queries), "search", n, "queries", enabled=progress and n > 0)
    rankings: dict[str, list[Hit]] = {}
    traces: dict[str, dict[str, list[int]]] = {}
    for qi, query in iterator:
        if config.latency == "batch":
            leg_results = {name: results[qi] for name, results in batch_results.items()}
            vectors = None if batch_vectors is None else batch_vectors[qi:qi + 1]
        else:
            vectors, results, seconds = first_stage([query])
            leg_results = {name: r[0] for name, r in results.items()}
            for stage, s in seconds.items():
                latency[stage][qi] = s * 1000
        t = time.perf_counter()
        if catalog is None:
            if fusion_params.wants_unreturned_scores():  # e.g. weighted's missing_score: union
                hits = fuse(leg_results, fusion_params, keep,
                            unreturned=unreturned_scores(legs, query, vectors, leg_results))
            else:
                hits = fuse(leg_results, fusion_params, keep)
        elif config.fusion_level == "unit":  # legs on different units, fused as they are: rows of the catalog
            hits = fuse({name: [(catalog.offset[name] + i, s) for i, s in ranked]
                         for name, ranked in leg_results.items()}, fusion_params, keep)
        else:  # legs on different units: fuse document rankings, keep each leg's best unit
            lifted, best = {}, {}
            for name, ranked in leg_results.items():
                unit = config.leg_unit(name)
                lifted[name], best[name] = lift_to_documents(ranked, catalog.doc_of, catalog.offset[name],
                                                             unit.aggregation, unit.aggregation_n)
            hits = attach_passages(fuse(lifted, fusion_params, keep), best, catalog, list(legs))
        if config.filters.exclude_query_document:
            hits = drop_query_document(hits, query, context.chunks)
        latency["fusion"][qi] = (time.perf_counter() - t) * 1000
        fused = hits
        if reranker is not None:
            t = time.perf_counter()
            hits = reranker.rerank(query.text, hits, config.top_k)
            latency["rerank"][qi] = (time.perf_counter() - t) * 1000
        hits = hits[: config.top_k]
        if catalog is not None:  # each leg's rows are rows of its own units: trace them as catalog rows
            leg_results = {name: [(catalog.offset[name] + i, s) for i, s in ranked]
                           for name, ranked in leg_results.items()}
        traces[query.query_id] = trace_stages(leg_results, fused, hits if reranker is not None else None)
        if config.grouping.enabled:
            t = time.perf_counter()
            hits = group_by_page(hits, context.chunks, config.grouping.boost_per_chunk, config.grouping.score)
            latency["grouping"][qi] = (time.perf_counter() - t) * 1000
        rankings[query.query_id] = hits
    if reranker is not None:
        reranker.finish()
    latency["total"] = sum(latency.values()) if latency else np.zeros(n)
    return SearchOutput(rankings, latency, traces, units=None if rows is context_chunks else rows)
