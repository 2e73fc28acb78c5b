"""Contextual enrichment: an LLM situates each chunk in its document before it is embedded."""
from kbench.enrichment.contextual import (EnrichmentError, EnrichmentResult, check_enrichment, context_prompt,
                                          contextual_text, enrich_chunks)

__all__ = ["EnrichmentError", "EnrichmentResult", "check_enrichment", "context_prompt", "contextual_text",
           "enrich_chunks"]
