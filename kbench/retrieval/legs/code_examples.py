"""``code_examples``: production's code-example search (Archon's "agentic RAG").

Cosine similarity of the query embedding to each code example's embedding (its code and LLM summary, as
production embeds them), over the second collection ``enrichment.code_examples`` builds. Its hits are code
examples (``<page>#code_example:<n>``, offsets of the code in its page), so it runs alone or fused with the
page legs; fused, rankings meet at document level (kbench/retrieval/units.py).
"""
from __future__ import annotations

from kbench.enrichment import CODE_EXAMPLE_UNIT
from kbench.retrieval.contracts import SearchContext
from kbench.retrieval.legs.vector import VectorLeg, VectorParams
from kbench.retrieval.registry import LEGS


@LEGS.register("code_examples", VectorParams)
class CodeExamplesLeg(VectorLeg):
    """The vector leg over the code-example index instead of the pages."""

    needs_query_vectors = True
    fixed_unit = CODE_EXAMPLE_UNIT

    def __init__(self, context: SearchContext, params: VectorParams):
        if context.vector_index is None or any(c.unit != CODE_EXAMPLE_UNIT for c in context.chunks[:1]):
            raise ValueError("the code_examples leg searches the code-example index; set "
                             "enrichment.code_examples.enabled: true (kbench.indexes builds it)")
        super().__init__(context, params)
