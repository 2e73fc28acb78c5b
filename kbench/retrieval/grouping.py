"""Page grouping: Archon's ``_group_by_page``, with page = document.

Per page: ``total = sum of its chunks' scores``; when the page has more than one chunk in the results,
``total *= 1 + boost_per_chunk * count`` (0.1 in production). Pages sort by total, best first; Python's
sort is stable, so equal totals keep the order in which pages first appeared, as in production.

A page comes back as one ``Hit``: its best-ranked chunk (the first one in the input) with the page's
total as the score, so document-level metrics see the page ranking and chunk-level metrics see one
chunk per page. Production sums ``similarity_score``; ``score="vector_similarity"`` reproduces that
(the vector leg's cosine, 0 for a chunk the vector leg did not find, as its hybrid SQL's COALESCE returns),
while the default ``"score"`` sums the score that ranked the chunk (fused or reranked).
"""
from __future__ import annotations

from dataclasses import replace

from kbench.records import Chunk, Hit


def hit_page_score(hit: Hit, score: str) -> float:
    if score == "vector_similarity":
        return float(hit.leg_scores.get("vector", 0.0))
    return float(hit.score)


def group_by_page(hits: list[Hit], chunks: list[Chunk], boost_per_chunk: float = 0.1,
                  score: str = "score") -> list[Hit]:
    """Aggregate chunk hits into one hit per document, scored and ordered as Archon does."""
    pages: dict[str, dict] = {}
    for hit in hits:
        page = pages.setdefault(chunks[hit.chunk_index].doc_id, {"best": hit, "total": 0.0, "count": 0})
        page["total"] += hit_page_score(hit, score)
        page["count"] += 1
    for page in pages.values():
        if page["count"] > 1:
            page["total"] *= 1 + boost_per_chunk * page["count"]
    ordered = sorted(pages.values(), key=lambda p: p["total"], reverse=True)
    return [replace(p["best"], score=p["total"]) for p in ordered]
