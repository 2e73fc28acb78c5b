"""Oracle ceilings of one run: how far a better later stage could take it with the candidates it had.

Per query, from the retrieval stage's trace (``Run.stages``), at document level and (span datasets) chunk
level, with the relevance of the run's own metrics:

- ``ceiling_<level>_pool_recall``: the recall of the union of every leg's list at its depth. Nothing after
  the legs (fusion, rerank, grouping) can find what this pool lacks.
- ``ceiling_<level>_pool_ndcg_at_<k>``: nDCG@k of that pool perfectly reordered (a perfect fusion and
  reranker over everything the legs returned).
- ``ceiling_<level>_rerank_ndcg_at_<k>``: nDCG@k of the fused candidates perfectly reordered: what a
  perfect reranker could reach at this depth (with rerank off, the fused top_k reordered).

A perfect reorder sorts the candidates by grade, best first; the ideal DCG stays that of every judged item,
so a ceiling below 1 means the pool lacks relevant items, and ``ceiling - run`` is what ordering alone could
still win. Documents are counted once each (the grade of the document), chunks by their own relevance.
"""
from __future__ import annotations

from collections.abc import Sequence

from kbench.evaluation.metrics import ndcg_at_k


def best_reorder_ndcg(candidate_grades: Sequence[int], relevant: Sequence[int], k: int) -> float:
    """nDCG@k of the candidates put in the best possible order (grades sorted, highest first)."""
    return ndcg_at_k(sorted(candidate_grades, reverse=True), list(relevant), k)


def pool_recall(pool: set[str], relevant: set[str]) -> float:
    """Relevant items in the pool / relevant items (0 when none is judged, as recall_at_k)."""
    return len(pool & relevant) / len(relevant) if relevant else 0.0


def ceiling_row(level: str, pool: Sequence[str], candidates: Sequence[str], grades: dict[str, int],
                ks: Sequence[int]) -> dict[str, float]:
    """One query's ceiling columns at ``level`` (doc or chunk). ``pool``: the ids the legs returned (union),
    ``candidates``: the fused candidates; ``grades``: id -> grade of every judged-relevant id."""
    relevant = [g for g in grades.values() if g > 0]
    pool_ids, candidate_ids = list(dict.fromkeys(pool)), list(dict.fromkeys(candidates))
    row = {f"ceiling_{level}_pool_recall": pool_recall(set(pool_ids), {i for i, g in grades.items() if g > 0})}
    for k in ks:
        row[f"ceiling_{level}_pool_ndcg_at_{k}"] = best_reorder_ndcg([grades.get(i, 0) for i in pool_ids], relevant, k)
        row[f"ceiling_{level}_rerank_ndcg_at_{k}"] = best_reorder_ndcg(
            [grades.get(i, 0) for i in candidate_ids], relevant, k)
    return row
