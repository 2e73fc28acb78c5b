"""Enrichment before embedding: contextual enrichment (an LLM situates each chunk in its document) and the
code-example index (fenced code blocks with an LLM summary each, searched by the ``code_examples`` leg)."""
from kbench.enrichment.code_examples import (CODE_EXAMPLE_UNIT, CodeExamples, CodeExamplesError, build_code_examples,
                                             check_code_examples, embedded_text, extract_code_examples, summary_prompt)
from kbench.enrichment.contextual import (EnrichmentError, EnrichmentResult, check_enrichment, context_prompt,
                                          contextual_text, enrich_chunks)

__all__ = ["CODE_EXAMPLE_UNIT", "CodeExamples", "CodeExamplesError", "EnrichmentError", "EnrichmentResult",
           "build_code_examples", "check_code_examples", "check_enrichment", "context_prompt", "contextual_text",
           "embedded_text", "enrich_chunks", "extract_code_examples", "summary_prompt"]
