"""Enrichment before embedding: contextual enrichment (an LLM situates each chunk in its document) and the
code-example index (fenced code blocks with an LLM summary each, searched by the ``code_examples`` leg)."""
from kbench.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".config": ["CODE_EXAMPLE_UNIT"],
    ".code_examples": ["CodeExamples", "CodeExamplesError", "build_code_examples",
                       "check_code_examples", "embedded_text", "extract_code_examples", "summary_prompt"],
    ".contextual": ["EnrichmentError", "EnrichmentResult", "check_enrichment", "context_prompt", "contextual_text",
                    "enrich_chunks"],
})
