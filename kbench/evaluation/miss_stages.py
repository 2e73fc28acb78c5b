"""Where each relevant item was lost: one ``miss_stage`` per query and relevant item.

A relevant item is a judged document (qrels, grade > 0) or, on span datasets, a reference span. It is a
**hit** when the run's final top ``K`` holds it (``K`` = ``evaluation.miss_k``, the largest k by default): a
document among the first ``K`` distinct documents; a span when one of the first ``K`` chunks matches it under
``evaluation.overlap``. Otherwise the retrieval stage's trace (``Run.stages``) says where it went:

- ``not_retrieved``: no leg had it within its window (below), and nothing later found it.
- ``lost_in_fusion``: a leg had it within its window; the fused candidates' window does not.
- ``lost_in_rerank``: the candidates handed to the reranker had it; the reranked top ``K`` does not.
- ``lost_in_grouping``: the top ``K`` before page grouping had it; the grouped top ``K`` does not.
- ``right_doc_wrong_chunk`` (spans): no stage had a matching chunk, but the final top ``K`` holds a chunk
  of the reference's document.
- ``split_across_chunks`` (spans): no chunk of the index matches the reference on its own, but the final
  top ``K`` chunks together do (the answer was retrieved in pieces).
- ``cut_by_chunking`` (spans): no chunk of the index matches the reference on its own (with a
  ``min_fraction: 0.5`` rule: no chunk covers most of it), and the top ``K`` does not hold it in pieces
  either. Chunking made a hit impossible, whatever the retriever did.

Windows: a stage "has" an item within its first ``W`` entries, where ``W`` is what the next stage can choose
from: with a reranker, the candidates it reranks (the fused list's length); without, ``K``. So a leg that
finds an item at rank 40 of 100 counts it as found only when a reranker looks that deep. Documents are
counted in distinct documents of each list, spans in chunks. A stage that loses an item and a later stage
that finds it again (fusion lifting an item no single leg ranked in its window) credit the last stage that
had it: the miss is where it was dropped for good.

``miss_share_<stage>``: the fraction of all (query, relevant item) pairs of the run at that stage, hits
included, so the shares add up to 1 and read as a waterfall from "everything relevant" to "what was hit".
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from kbench.evaluation.config import OverlapRule
from kbench.evaluation.relevance import chunk_matches_span, overlap_meets_rule
from kbench.evaluation.spans import chunk_ranges, intersection_length, span_ranges
from kbench.records import Chunk, Span

MISS_STAGES = ("hit", "not_retrieved", "lost_in_fusion", "lost_in_rerank", "lost_in_grouping",
               "right_doc_wrong_chunk", "split_across_chunks", "cut_by_chunking")
LOSS_AFTER = {"legs": "lost_in_fusion", "fusion": "lost_in_rerank"}


def distinct_docs(ranked: Iterable[Chunk], n: int) -> list[str]:
    """The first ``n`` distinct documents of a chunk list."""
    out: list[str] = []
    for c in ranked:
        if c.doc_id not in out:
            out.append(c.doc_id)
            if len(out) == n:
                break
    return out


def stage_windows(stages: Mapping[str, Sequence[Chunk]], k: int) -> list[tuple[str, list[Sequence[Chunk]], int]]:
    """``(stage, its lists, window)`` in pipeline order: the legs, the fused candidates and, with a reranker,
    its output. ``stages`` holds one query's trace with chunks for ids (``leg_<name>``, ``fusion``,
    ``rerank``)."""
    reranked = "rerank" in stages
    window = max(k, len(stages.get("fusion", ()))) if reranked else k
    legs = [v for name, v in stages.items() if name.startswith("leg_")]
    out = [("legs", legs, window), ("fusion", [stages.get("fusion", [])], window)]
    if reranked:
        out.append(("rerank", [stages["rerank"]], k))
    return out


def _lost_where(present: Sequence[bool], names: Sequence[str]) -> str | None:
    """The loss after the last stage that had the item (None when none had it): the stage after the legs is
    fusion, after the fused candidates the reranker, after the last stage grouping (the final cut)."""
    last = max((i for i, p in enumerate(present) if p), default=None)
    if last is None:
        return None
    if last == len(names) - 1:
        return "lost_in_grouping"
    return LOSS_AFTER[names[last]]


def doc_miss_stages(relevant_docs: Sequence[str], final: Sequence[Chunk], stages: Mapping[str, Sequence[Chunk]],
                    k: int) -> list[str]:
    """One stage per relevant document (in the given order)."""
    top = set(distinct_docs(final, k))
    windows = stage_windows(stages, k)
    names = [name for name, _, _ in windows]
    seen = [[set(distinct_docs(lst, w)) for lst in lists] for _, lists, w in windows]
    out = []
    for doc in relevant_docs:
        if doc in top:
            out.append("hit")
            continue
        present = [any(doc in s for s in per_stage) for per_stage in seen]
        out.append(_lost_where(present, names) or "not_retrieved")
    return out


def span_miss_stages(spans: Sequence[Span], final: Sequence[Chunk], stages: Mapping[str, Sequence[Chunk]],
                     k: int, rule: OverlapRule, doc_chunks: Mapping[str, Sequence[Chunk]]) -> list[str]:
    """One stage per reference span (in the given order); ``doc_chunks``: every indexed chunk per document."""
    top = list(final[:k])
    top_docs = {c.doc_id for c in top}
    windows = stage_windows(stages, k)
    names = [name for name, _, _ in windows]
    out = []
    for span in spans:
        if any(chunk_matches_span(c, span, rule) for c in top):
            out.append("hit")
            continue
        if not any(chunk_matches_span(c, span, rule) for c in doc_chunks.get(span.doc_id, ())):
            together = intersection_length(chunk_ranges(top), span_ranges([span]))
            out.append("split_across_chunks" if overlap_meets_rule(together, span, rule) else "cut_by_chunking")
            continue
        present = [any(chunk_matches_span(c, span, rule) for lst in lists for c in lst[:w])
                   for _, lists, w in windows]
        lost = _lost_where(present, names)
        if lost is not None:
            out.append(lost)
        else:
            out.append("right_doc_wrong_chunk" if span.doc_id in top_docs else "not_retrieved")
    return out


def miss_shares(per_query_stages: Iterable[object]) -> dict[str, float]:
    """``miss_share_<stage>`` for every stage: its fraction of all (query, relevant item) pairs (a query
    without attribution, NaN in a per-query table, is left out)."""
    counts = Counter(s for stages in per_query_stages if not isinstance(stages, (float, type(None)))
                     for s in stages)
    total = sum(counts.values())
    return {f"miss_share_{s}": (counts[s] / total if total else float("nan")) for s in MISS_STAGES}
