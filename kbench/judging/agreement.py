"""Agreement between the judge and existing labels: Cohen's kappa and the confusion table."""
from __future__ import annotations

import numpy as np


def confusion(gold: list[int], judged: list[int], gold_labels: list[int], judged_labels: list[int]) -> np.ndarray:
    """Counts: rows are gold labels, columns the judge's."""
    table = np.zeros((len(gold_labels), len(judged_labels)), dtype=int)
    for g, j in zip(gold, judged):
        table[gold_labels.index(g), judged_labels.index(j)] += 1
    return table


def cohen_kappa(a: list[int], b: list[int]) -> float:
    """(p_o - p_e) / (1 - p_e) over the labels either rater used; NaN when chance agreement is total."""
    if len(a) != len(b) or not a:
        raise ValueError("cohen_kappa: two equally long, non-empty lists of labels")
    labels = sorted(set(a) | set(b))
    table = confusion(a, b, labels, labels).astype(float)
    n = table.sum()
    observed = np.trace(table) / n
    expected = float((table.sum(axis=1) @ table.sum(axis=0)) / n**2)
    return float("nan") if expected == 1 else float((observed - expected) / (1 - expected))
