def hit_rate_at_k(ranked: list[int], relevant: list[int], k: int) -> float:
    """1 if any relevant item is in the top k, else 0 (trec_eval success_k)."""
    return 1.0 if any(g > 0 for g in ranked[:k]) else 0.0
