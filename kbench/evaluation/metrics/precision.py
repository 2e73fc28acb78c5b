def precision_at_k(ranked: list[int], relevant: list[int], k: int) -> float:
    """Relevant items in the top k, divided by k (trec_eval P_k: a short list is not padded in your favour)."""
    return sum(1 for g in ranked[:k] if g > 0) / k
