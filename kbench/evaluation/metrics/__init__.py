"""IR metrics, one file each, over one query.

Every metric takes ``ranked``: the relevance grade of each retrieved item in rank order (0 = not
relevant), ``relevant``: the grades of every judged-relevant item (grade > 0), and a cutoff ``k``.
Definitions follow trec_eval (checked against pytrec_eval to 1e-9 in tests/evaluation).
"""
from kbench.evaluation.metrics.average_precision import average_precision_at_k
from kbench.evaluation.metrics.hit_rate import hit_rate_at_k
from kbench.evaluation.metrics.mrr import mrr_at_k
from kbench.evaluation.metrics.ndcg import ndcg_at_k
from kbench.evaluation.metrics.precision import precision_at_k
from kbench.evaluation.metrics.recall import recall_at_k

METRICS = {
    "precision": precision_at_k,
    "recall": recall_at_k,
    "mrr": mrr_at_k,
    "ndcg": ndcg_at_k,
    "map": average_precision_at_k,
    "hit_rate": hit_rate_at_k,
}

__all__ = ["METRICS", "average_precision_at_k", "hit_rate_at_k", "mrr_at_k", "ndcg_at_k",
           "precision_at_k", "recall_at_k"]
