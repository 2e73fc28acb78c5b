def average_precision_at_k(ranked: list[int], relevant: list[int], k: int) -> float:
    """Sum of precision at each relevant rank within the top k, divided by all relevant (trec_eval map_cut_k)."""
    if not relevant:
        return 0.0
    hits, total = 0, 0.0
    for rank, g in enumerate(ranked[:k], start=1):
        if g > 0:
            hits += 1
            total += hits / rank
    return total / len(relevant)
