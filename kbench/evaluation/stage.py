"""Score rankings: per-query metrics at every k, at document level and (span datasets) chunk level, then
the diagnostics: token budgets, where each miss happened, oracle ceilings and slice labels."""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from kbench.evaluation.budgets import budget_metric_row
from kbench.evaluation.ceilings import ceiling_row
from kbench.evaluation.config import EvaluationConfig
from kbench.evaluation.measures import Measure
from kbench.evaluation.metrics import METRICS
from kbench.evaluation.miss_stages import doc_miss_stages, miss_shares, span_miss_stages
from kbench.evaluation.relevance import chunk_matches_span, relevant_chunks
from kbench.evaluation.slices import slice_columns
from kbench.evaluation.spans import span_metric_row
from kbench.records import Chunk, Dataset, Query, Run, chunks_by_doc


def metric_row(ranked: list[int], relevant: list[int], ks: list[int], prefix: str,
               measures: list[Measure] | None = None) -> dict[str, float]:
    """Every metric at every k, or only ``measures`` (evaluation.metrics, ir_measures-style names)."""
    if measures:
        return {f"{prefix}{m.column}": m.score(ranked, relevant) for m in measures}
    return {f"{prefix}{name}_at_{k}": fn(ranked, relevant, k) for name, fn in METRICS.items() for k in ks}


def evaluate_rankings(dataset: Dataset, chunks: list[Chunk] | None, run: Run,
                      config: EvaluationConfig, token_counts: Mapping[str, int] | None = None) -> pd.DataFrame:
    """One row per query: ``doc_<metric>_at_<k>`` always; for span datasets ``chunk_<metric>_at_<k>`` (level
    auto/chunk) and the span columns of kbench.evaluation.spans (``span_*_at_<k>``, ``span_precision_omega``,
    ``spans_hit``, ``spans_covered``, ``span_refs``: list columns line up with the query's reference spans).

    Diagnostics (kbench.evaluation.budgets, miss_stages, ceilings, slices): ``*_at_budget_<n>`` when
    ``evaluation.budgets`` is set (``token_counts``: chunk id -> tokens of every ranked chunk); ``miss_stage``
    (a list lined up with the query's relevant documents, or its reference spans) and ``ceiling_*`` when the
    run carries the retrieval trace (``Run.stages``); ``slice_<key>`` per ``evaluation.slices``.

    ``chunks=None`` scores documents only (a run from another system, e.g. an imported TREC file); a query
    missing from the run scores 0. A query of a span dataset whose references are document labels only (no
    spans) has document columns and no chunk or span columns (NaN, left out of the means)."""
    ks, measures = config.k, config.measures
    with_chunks = chunks is not None
    chunk_level = with_chunks and (config.level == "chunk" or (config.level == "auto" and dataset.has_spans))
    if config.level == "chunk" and not dataset.has_spans:
        raise ValueError("evaluation.level: 'chunk' needs a span dataset; this one has document qrels only")
    by_doc = chunks_by_doc(chunks or [])
    row_of = {c.chunk_id: i for i, c in enumerate(chunks or [])}
    rows = []
    labelled = [q for q in dataset.queries if q.query_id in dataset.qrels or q.query_id in dataset.spans]
    if not labelled and dataset.queries:  # a query log's questions, none labelled yet: ranked, never scored 0
        return unlabelled_rows(dataset, run, ks)
    for query in labelled:  # a question not labelled yet is left out (counted by the loader as unlabelled)
        hits = run[query.query_id]
        qrels = dataset.qrels.get(query.query_id, {})
        docs = run.doc_ids(query.query_id)
        row = {"query_id": query.query_id, "n_results": len(hits)}
        row.update(metric_row([qrels.get(d, 0) for d in docs], [g for g in qrels.values() if g > 0], ks, "doc_",
                              measures))
        for k in ks:  # how much of the top k carries a label at all (a thin pool shows as such; kbench judge)
            row[f"judged_at_{k}"] = sum(d in qrels for d in docs[:k]) / len(docs[:k]) if docs[:k] else float("nan")
        if with_chunks:
            rows_hit = [row_of[h.chunk_id] for h in hits]  # the chunks the run ranked, as rows of ``chunks``
        has_spans = query.query_id in dataset.spans
        if chunk_level and has_spans:
            spans = dataset.spans.get(query.query_id, [])
            relevant = relevant_chunks(chunks, spans, config.overlap, by_doc)
            ranked = [1 if i in relevant else 0 for i in rows_hit]
            row.update(metric_row(ranked, [1] * len(relevant), ks, "chunk_", measures))
            top = [chunks[i] for i in rows_hit[: max(ks)]]
            row["spans_hit"] = [
                next((r for r, c in enumerate(top, 1) if chunk_matches_span(c, s, config.overlap)), 0)
                for s in spans
            ]  # per reference span: the rank of the first chunk that hits it, 0 = missed
        if with_chunks and has_spans:
            spans = dataset.spans.get(query.query_id, [])
            candidates = [chunks[i] for d in {s.doc_id for s in spans} for i in by_doc.get(d, ())]
            row.update(span_metric_row(spans, [chunks[i] for i in rows_hit], candidates, ks))
        if with_chunks:
            row.update(diagnostic_row(query, dataset, chunks, [chunks[i] for i in rows_hit], run, config,
                                      token_counts, by_doc, row_of, chunk_level))
        row["retrieved"] = [h.chunk_id for h in hits]
        row["scores"] = [float(h.score) for h in hits]
        rows.append(row)
    frame = pd.DataFrame(rows)
    for column, labels in slice_columns(dataset, config.slices).items():
        frame[column] = frame["query_id"].map(labels)
    return frame


def unlabelled_rows(dataset: Dataset, run: Run, ks: list[int]) -> pd.DataFrame:
    """A run over questions none of which carries a label: a row per question with what needs no label (its
    results, ``judged_at_<k>`` = 0, its ranking), so the run keeps its rankings and traces for ``kbench judge`` and
    ``kbench label``, and no quality metric at all (never a 0 that reads as a miss)."""
    rows = []
    for query in dataset.queries:
        hits = run[query.query_id]
        row = {"query_id": query.query_id, "n_results": len(hits)}
        row.update({f"judged_at_{k}": 0.0 if hits else float("nan") for k in ks})
        row["retrieved"] = [h.chunk_id for h in hits]
        row["scores"] = [float(h.score) for h in hits]
        rows.append(row)
    return pd.DataFrame(rows)


def diagnostic_row(query: Query, dataset: Dataset, chunks: list[Chunk], ranked: list[Chunk], run: Run,
                   config: EvaluationConfig, token_counts: Mapping[str, int] | None,
                   by_doc: dict[str, list[int]], row_of: dict[str, int], chunk_level: bool) -> dict[str, object]:
    """One query's budget, miss-stage and ceiling columns (see evaluate_rankings)."""
    row: dict[str, object] = {}
    qrels = dataset.qrels.get(query.query_id, {})
    relevant_docs = [d for d, g in qrels.items() if g > 0]
    spans = dataset.spans.get(query.query_id, []) if dataset.has_spans else None
    if config.budgets:
        if token_counts is None:
            raise ValueError("evaluation.budgets needs the token count of every ranked chunk (token_counts)")
        row.update(budget_metric_row(ranked, token_counts, config.budgets, spans, set(relevant_docs)))
    trace = run.stages.get(query.query_id)
    if not config.miss_attribution or trace is None:
        return row
    stages = {name: [chunks[row_of[c]] for c in ids] for name, ids in trace.items()}
    k = config.miss_cutoff
    if spans is not None:
        doc_chunks = {d: [chunks[i] for i in by_doc.get(d, ())] for d in {s.doc_id for s in spans}}
        row["miss_stage"] = span_miss_stages(spans, ranked, stages, k, config.overlap, doc_chunks)
    else:
        row["miss_stage"] = doc_miss_stages(relevant_docs, ranked, stages, k)
    pool = [c for name, lst in stages.items() if name.startswith("leg_") for c in lst]
    candidates = stages.get("fusion", [])
    row.update(ceiling_row("doc", [c.doc_id for c in pool], [c.doc_id for c in candidates], qrels, config.k))
    if chunk_level:
        relevant = relevant_chunks(chunks, spans or [], config.overlap, by_doc)
        grades = {chunks[i].chunk_id: 1 for i in relevant}
        row.update(ceiling_row("chunk", [c.chunk_id for c in pool], [c.chunk_id for c in candidates], grades,
                               config.k))
    return row


def latency_summary(latency_ms: dict[str, np.ndarray]) -> dict[str, float]:
    """``latency_ms_<stage>_p50`` and ``_p95`` of per-query milliseconds."""
    out = {}
    for stage, values in latency_ms.items():
        out[f"latency_ms_{stage}_p50"] = float(np.percentile(values, 50))
        out[f"latency_ms_{stage}_p95"] = float(np.percentile(values, 95))
    return out


def summarize(per_query: pd.DataFrame) -> dict[str, float]:
    """Mean of every metric column over queries, and ``miss_share_<stage>`` when miss stages were attributed."""
    numeric = per_query.select_dtypes("number").drop(columns=["n_results"], errors="ignore")
    out = {col: float(numeric[col].mean()) for col in numeric.columns}
    if "miss_stage" in per_query:
        out.update(miss_shares(per_query["miss_stage"]))
    return out
