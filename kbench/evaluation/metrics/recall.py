def recall_at_k(ranked: list[int], relevant: list[int], k: int) -> float:
    """Relevant items in the top k, divided by the number of relevant items (trec_eval recall_k)."""
    if not relevant:
        return 0.0
    return sum(1 for g in ranked[:k] if g > 0) / len(relevant)
