"""ir_measures-style metric names (``nDCG@10``, ``R@100``, ``RR@10``, ``P(rel=2)@5``, ``AP@100``, ``Success@10``),
computed by kbench's own metrics.

``evaluation.metrics`` lists such names; each becomes a ``Measure`` that scores one query from the grades of
its ranked items and of every judged item. ``rel=N`` counts an item as relevant when its grade is at least N
(trec_eval's ``relevance_level``); nDCG takes the grades themselves as gains (0–3 in TREC-style qrels) and has
no ``rel``. Columns keep kbench's names (``ndcg_at_10``, ``precision_at_5_rel_2``), so tables, comparisons
and the headline read them like the default metrics. Checked against ir_measures and pytrec_eval in
tests/evaluation/test_measures.py.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from kbench.evaluation.metrics import METRICS

# ir_measures name -> kbench metric name (a key of METRICS)
IR_MEASURES = {"nDCG": "ndcg", "P": "precision", "R": "recall", "RR": "mrr", "AP": "map", "Success": "hit_rate"}
GRADED = {"nDCG"}  # measures that use the grade as gain, not a relevance threshold
NAME_PATTERN = re.compile(r"^(?P<name>[A-Za-z]+)(?:\((?P<params>[^()]*)\))?@(?P<k>\d+)$")


@dataclass(frozen=True)
class Measure:
    """One ir_measures-style measure: which metric, its cutoff and the grade from which an item is relevant."""

    name: str  # as ir_measures spells it: nDCG, P, R, RR, AP, Success
    k: int
    rel: int = 1

    @property
    def column(self) -> str:
        """The per-query column (without the level prefix): ``precision_at_5``, ``precision_at_5_rel_2``."""
        base = f"{IR_MEASURES[self.name]}_at_{self.k}"
        return base if self.rel == 1 else f"{base}_rel_{self.rel}"

    def score(self, ranked: list[int], relevant: list[int]) -> float:
        """``ranked``: grades of the retrieved items in rank order; ``relevant``: grades of the judged items > 0."""
        fn: Callable[[list[int], list[int], int], float] = METRICS[IR_MEASURES[self.name]]
        if self.name in GRADED:
            return fn(ranked, relevant, self.k)
        return fn([g if g >= self.rel else 0 for g in ranked], [g for g in relevant if g >= self.rel], self.k)

    def __str__(self) -> str:
        return f"{self.name}(rel={self.rel})@{self.k}" if self.rel != 1 else f"{self.name}@{self.k}"


def parse_measure(text: str) -> Measure:
    """``"P(rel=2)@5"`` -> ``Measure("P", 5, 2)``; a ValueError naming the problem and what is allowed."""
    allowed = ", ".join(f"{n}@k" for n in IR_MEASURES)
    m = NAME_PATTERN.match(text.strip()) if isinstance(text, str) else None
    if m is None:
        raise ValueError(f"{text!r} is not a measure name like nDCG@10 or P(rel=2)@5 (allowed: {allowed}; a "
                         "cutoff @k is required)")
    name = m.group("name")
    if name not in IR_MEASURES:
        close = [n for n in IR_MEASURES if n.lower() == name.lower()]
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ValueError(f"{text!r}: unknown measure {name!r}{hint}; allowed: {allowed}")
    k = int(m.group("k"))
    if k < 1:
        raise ValueError(f"{text!r}: the cutoff must be at least 1")
    rel = 1
    for part in filter(None, (p.strip() for p in (m.group("params") or "").split(","))):
        key, _, value = part.partition("=")
        if key.strip() != "rel" or not value.strip().isdigit() or int(value) < 1:
            raise ValueError(f"{text!r}: the only parameter is rel=N, a whole grade >= 1 (got {part!r})")
        if name in GRADED:
            raise ValueError(f"{text!r}: nDCG uses the grades as gains and takes no rel=; write nDCG@{k}")
        rel = int(value)
    return Measure(name, k, rel)
