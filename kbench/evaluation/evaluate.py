"""Score rankings: per-query metrics at every k, at document level and (span datasets) chunk level."""
from __future__ import annotations

import pandas as pd

from kbench.config import EvaluationConfig
from kbench.evaluation.metrics import METRICS
from kbench.evaluation.relevance import chunk_matches_span, relevant_chunks
from kbench.evaluation.spans import span_metric_row
from kbench.records import Chunk, Dataset, Hit


def doc_ranking(hits: list[Hit], chunks: list[Chunk]) -> list[str]:
    """Chunk ranking -> document ranking: each document at the rank of its best chunk."""
    seen, docs = set(), []
    for h in hits:
        d = chunks[h.chunk_index].doc_id
        if d not in seen:
            seen.add(d)
            docs.append(d)
    return docs


def metric_row(ranked: list[int], relevant: list[int], ks: list[int], prefix: str) -> dict[str, float]:
    return {f"{prefix}{name}_at_{k}": fn(ranked, relevant, k) for name, fn in METRICS.items() for k in ks}


def evaluate_rankings(dataset: Dataset, chunks: list[Chunk], rankings: dict[str, list[Hit]],
                      config: EvaluationConfig) -> pd.DataFrame:
    """One row per query: ``doc_<metric>_at_<k>`` always; for span datasets ``chunk_<metric>_at_<k>`` (level
    auto/chunk) and the span columns of kbench.evaluation.spans (``span_*_at_<k>``, ``span_precision_omega``,
    ``spans_hit``, ``spans_covered``, ``span_refs``: list columns line up with the query's reference spans)."""
    ks = config.k
    chunk_level = config.level == "chunk" or (config.level == "auto" and dataset.has_spans)
    if config.level == "chunk" and not dataset.has_spans:
        raise ValueError("evaluation.level: 'chunk' needs a span dataset; this one has document qrels only")
    chunks_by_doc: dict[str, list[int]] = {}
    for i, c in enumerate(chunks):
        chunks_by_doc.setdefault(c.doc_id, []).append(i)
    rows = []
    for query in dataset.queries:
        hits = rankings.get(query.query_id, [])
        qrels = dataset.qrels.get(query.query_id, {})
        docs = doc_ranking(hits, chunks)
        row = {"query_id": query.query_id, "n_results": len(hits)}
        row.update(metric_row([qrels.get(d, 0) for d in docs], [g for g in qrels.values() if g > 0], ks, "doc_"))
        if chunk_level:
            spans = dataset.spans.get(query.query_id, [])
            relevant = relevant_chunks(chunks, spans, config.overlap, chunks_by_doc)
            ranked = [1 if h.chunk_index in relevant else 0 for h in hits]
            row.update(metric_row(ranked, [1] * len(relevant), ks, "chunk_"))
            top = [chunks[h.chunk_index] for h in hits[: max(ks)]]
            row["spans_hit"] = [
                next((r for r, c in enumerate(top, 1) if chunk_matches_span(c, s, config.overlap)), 0)
                for s in spans
            ]  # per reference span: the rank of the first chunk that hits it, 0 = missed
        if dataset.has_spans:
            spans = dataset.spans.get(query.query_id, [])
            candidates = [chunks[i] for d in {s.doc_id for s in spans} for i in chunks_by_doc.get(d, ())]
            row.update(span_metric_row(spans, [chunks[h.chunk_index] for h in hits], candidates, ks))
        row["retrieved"] = [chunks[h.chunk_index].chunk_id for h in hits]
        row["scores"] = [float(h.score) for h in hits]
        rows.append(row)
    return pd.DataFrame(rows)


def summarize(per_query: pd.DataFrame) -> dict[str, float]:
    """Mean of every metric column over queries."""
    numeric = per_query.select_dtypes("number").drop(columns=["n_results"], errors="ignore")
    return {col: float(numeric[col].mean()) for col in numeric.columns}
