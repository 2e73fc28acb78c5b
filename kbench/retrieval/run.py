"""The search stage of a run: legs -> fusion -> rerank -> grouping, timed per stage and per query."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from kbench.config import RerankConfig, RetrievalConfig
from kbench.records import Hit, Query
from kbench.retrieval.registry import FUSIONS, LEGS, RERANKERS, SearchContext


@dataclass
class SearchOutput:
    rankings: dict[str, list[Hit]]
    latency_ms: dict[str, np.ndarray] = field(default_factory=dict)  # stage -> per-query milliseconds


def build_legs(context: SearchContext, config: RetrievalConfig) -> dict[str, object]:
    return {name: LEGS.get(name).impl(context, LEGS.params(name, config.leg_params.get(name, {})))
            for name in config.legs}


def search(queries: list[Query], context: SearchContext, config: RetrievalConfig,
           rerank: RerankConfig | None = None, legs: dict[str, object] | None = None,
           progress: bool = False) -> SearchOutput:
    """Rank chunks for every query. Legs run batched; each stage's time is spread evenly over queries."""
    legs = legs or build_legs(context, config)
    n = len(queries)
    latency: dict[str, np.ndarray] = {}
    depth = config.candidates_per_leg or config.top_k
    reranker = None
    if rerank is not None and rerank.enabled:
        reranker = RERANKERS.get(rerank.method).impl(context, rerank.params)
        depth = max(depth, config.top_k * getattr(rerank.params, "candidate_multiplier", 1))
    query_vectors = None
    if any(getattr(leg, "needs_query_vectors", False) for leg in legs.values()):
        t = time.perf_counter()
        query_vectors = context.embed_queries([q.text for q in queries])
        latency["embed_query"] = np.full(n, (time.perf_counter() - t) * 1000 / max(n, 1))
    mask = None
    leg_results = {}
    for name, leg in legs.items():
        t = time.perf_counter()
        leg_results[name] = leg.search(queries, query_vectors, depth, mask)
        latency[f"leg_{name}"] = np.full(n, (time.perf_counter() - t) * 1000 / max(n, 1))
    fuse = FUSIONS.get(config.fusion.method)
    params = config.fusion.params
    rankings: dict[str, list[Hit]] = {}
    fusion_ms = np.zeros(n)
    rerank_ms = np.zeros(n)
    for qi, query in enumerate(queries):
        t = time.perf_counter()
        keep = depth if reranker is not None else config.top_k
        hits = fuse.impl({name: res[qi] for name, res in leg_results.items()}, params, keep)
        fusion_ms[qi] = (time.perf_counter() - t) * 1000
        if reranker is not None:
            t = time.perf_counter()
            hits = reranker.rerank(query.text, hits, config.top_k)
            rerank_ms[qi] = (time.perf_counter() - t) * 1000
        rankings[query.query_id] = hits[: config.top_k]
    latency["fusion"] = fusion_ms
    if reranker is not None:
        latency["rerank"] = rerank_ms
    latency["total"] = sum(latency.values())
    return SearchOutput(rankings, latency)
