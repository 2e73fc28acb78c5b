"""What every generator shares: a proposal per candidate question, the sampling and the build report.

A method looks at one document and proposes questions. Each ``Proposal`` says which characters to take
out of the indexed copy (the sentence, the heading line, the commit subject), where its reference lies in
the original text, its stratum (the section it came from, for stratified sampling) and its group (at most
one question per group is taken, so two removals never overlap or empty each other's reference). The
builder (``build.py``) samples proposals, applies the removals and recomputes every offset.
"""
from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol

from kbench.datasets.code_qa import Edit
from kbench.datasets.reading import DatasetError
from kbench.records import Document


class SyntheticError(DatasetError):
    """A source or option the builder cannot use; the message names the problem and the fix."""


@dataclass(frozen=True)
class Proposal:
    doc_id: str
    question: str
    ref_start: int  # reference span in the ORIGINAL text
    ref_end: int
    removal: Edit | None  # what leaves the indexed copy (None: nothing, e.g. an llm question)
    stratum: str  # section path or paragraph; sampling spreads across strata
    group: str  # at most one proposal per group is kept
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class Proposals:
    """One document's proposals and the candidates it refused, by reason."""

    items: list[Proposal] = field(default_factory=list)
    rejected: Counter = field(default_factory=Counter)


class Method(Protocol):
    """A generator: ``propose(document, params, context) -> Proposals``; ``needs`` names its document type."""

    name: str

    def propose(self, document: Document, params: dict[str, Any]) -> Proposals: ...


def stratified_sample(by_doc: dict[str, list[Proposal]], *, per_doc: int | None, max_questions: int | None,
                      seed: int) -> tuple[list[Proposal], Counter]:
    """A seeded sample spread across documents and, inside each, across strata.

    Per document: strata in a shuffled order, one proposal from each in turn (shuffled within the
    stratum), at most one per group, up to ``per_doc``. Across documents: round-robin over the
    documents in a shuffled order up to ``max_questions``, so no file takes more than its turn."""
    rng = random.Random(seed)
    dropped: Counter = Counter()
    queues: dict[str, list[Proposal]] = {}
    for doc_id in sorted(by_doc):
        strata: dict[str, list[Proposal]] = {}
        for p in by_doc[doc_id]:
            strata.setdefault(p.stratum, []).append(p)
        names = sorted(strata)
        rng.shuffle(names)
        for name in names:
            rng.shuffle(strata[name])
        order, groups = [], set()
        while any(strata[n] for n in names):
            for n in names:
                if strata[n]:
                    p = strata[n].pop()
                    if p.group in groups:
                        dropped["same_group_as_another"] += 1
                        continue
                    groups.add(p.group)
                    order.append(p)
        if per_doc is not None and len(order) > per_doc:
            dropped["over_per_doc"] += len(order) - per_doc
            order = order[:per_doc]
        queues[doc_id] = order
    docs = sorted(queues)
    rng.shuffle(docs)
    chosen: list[Proposal] = []
    depth = 0
    while any(depth < len(queues[d]) for d in docs):
        for d in docs:
            if depth < len(queues[d]):
                chosen.append(queues[d][depth])
        depth += 1
    if max_questions is not None and len(chosen) > max_questions:
        dropped["over_max"] += len(chosen) - max_questions
        chosen = chosen[:max_questions]
    return chosen, dropped
