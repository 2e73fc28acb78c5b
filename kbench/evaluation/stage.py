"""Score rankings: per-query metrics at every k, at document level and (span datasets) chunk level."""
from __future__ import annotations

import pandas as pd

from kbench.evaluation.config import EvaluationConfig
from kbench.evaluation.metrics import METRICS
from kbench.evaluation.relevance import chunk_matches_span, relevant_chunks
from kbench.evaluation.spans import span_metric_row
from kbench.records import Chunk, Dataset, Run, chunks_by_doc


def metric_row(ranked: list[int], relevant: list[int], ks: list[int], prefix: str) -> dict[str, float]:
    return {f"{prefix}{name}_at_{k}": fn(ranked, relevant, k) for name, fn in METRICS.items() for k in ks}


def evaluate_rankings(dataset: Dataset, chunks: list[Chunk] | None, run: Run,
                      config: EvaluationConfig) -> pd.DataFrame:
    """One row per query: ``doc_<metric>_at_<k>`` always; for span datasets ``chunk_<metric>_at_<k>`` (level
    auto/chunk) and the span columns of kbench.evaluation.spans (``span_*_at_<k>``, ``span_precision_omega``,
    ``spans_hit``, ``spans_covered``, ``span_refs``: list columns line up with the query's reference spans).

    ``chunks=None`` scores documents only (a run from another system, e.g. an imported TREC file); a query
    missing from the run scores 0."""
    ks = config.k
    with_chunks = chunks is not None
    chunk_level = with_chunks and (config.level == "chunk" or (config.level == "auto" and dataset.has_spans))
    if config.level == "chunk" and not dataset.has_spans:
        raise ValueError("evaluation.level: 'chunk' needs a span dataset; this one has document qrels only")
    by_doc = chunks_by_doc(chunks or [])
    row_of = {c.chunk_id: i for i, c in enumerate(chunks or [])}
    rows = []
    for query in dataset.queries:
        hits = run[query.query_id]
        qrels = dataset.qrels.get(query.query_id, {})
        docs = run.doc_ids(query.query_id)
        row = {"query_id": query.query_id, "n_results": len(hits)}
        row.update(metric_row([qrels.get(d, 0) for d in docs], [g for g in qrels.values() if g > 0], ks, "doc_"))
        if with_chunks:
            rows_hit = [row_of[h.chunk_id] for h in hits]  # the chunks the run ranked, as rows of ``chunks``
        if chunk_level:
            spans = dataset.spans.get(query.query_id, [])
            relevant = relevant_chunks(chunks, spans, config.overlap, by_doc)
            ranked = [1 if i in relevant else 0 for i in rows_hit]
            row.update(metric_row(ranked, [1] * len(relevant), ks, "chunk_"))
            top = [chunks[i] for i in rows_hit[: max(ks)]]
            row["spans_hit"] = [
                next((r for r, c in enumerate(top, 1) if chunk_matches_span(c, s, config.overlap)), 0)
                for s in spans
            ]  # per reference span: the rank of the first chunk that hits it, 0 = missed
        if with_chunks and dataset.has_spans:
            spans = dataset.spans.get(query.query_id, [])
            candidates = [chunks[i] for d in {s.doc_id for s in spans} for i in by_doc.get(d, ())]
            row.update(span_metric_row(spans, [chunks[i] for i in rows_hit], candidates, ks))
        row["retrieved"] = [h.chunk_id for h in hits]
        row["scores"] = [float(h.score) for h in hits]
        rows.append(row)
    return pd.DataFrame(rows)


def summarize(per_query: pd.DataFrame) -> dict[str, float]:
    """Mean of every metric column over queries."""
    numeric = per_query.select_dtypes("number").drop(columns=["n_results"], errors="ignore")
    return {col: float(numeric[col].mean()) for col in numeric.columns}
