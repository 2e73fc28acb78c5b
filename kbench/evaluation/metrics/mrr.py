def mrr_at_k(ranked: list[int], relevant: list[int], k: int) -> float:
    """1 / rank of the first relevant item within the top k, else 0 (trec_eval recip_rank on a run cut at k)."""
    for rank, g in enumerate(ranked[:k], start=1):
        if g > 0:
            return 1.0 / rank
    return 0.0
