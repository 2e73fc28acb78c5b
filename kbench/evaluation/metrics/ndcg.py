import math


def dcg(grades: list[int]) -> float:
    return sum(g / math.log2(rank + 1) for rank, g in enumerate(grades, start=1) if g > 0)


def ndcg_at_k(ranked: list[int], relevant: list[int], k: int) -> float:
    """DCG of the top k (linear gain, log2 discount) over the DCG of the best possible top k (trec_eval ndcg_cut_k)."""
    ideal = dcg(sorted(relevant, reverse=True)[:k])
    return dcg(ranked[:k]) / ideal if ideal > 0 else 0.0
