"""Contextual embeddings (Archon §3, the Archon replication guide's prompt): an LLM situates each chunk in its document.

For each chunk the LLM sees the document's first ``document_chars`` characters (5,000 in production) and
the chunk, and answers with a short context; the text embedded is ``context + "\\n---\\n" + chunk``.
Keyword legs and rerankers keep seeing the plain chunk text.

Requests go through the one LLM client (kbench.llm): retried, counted, and every answer cached by its
exact prompt (which holds the chunk and the document prefix) within a namespace of model, max_tokens and
the prompt template, so a re-run never asks the LLM twice. The enriched text is
what the embedding cache hashes, so vectors of plain and enriched chunks never mix.

An empty answer is embedded as production embeds it (``"\n---\n" + chunk``) and counted as unusable
(``enrichment_empty``, ``llm_enrichment_unusable_answers``).
A chunk whose request fails keeps its plain text (production's fallback) and is counted; its answer is
not cached, so the next run retries it. If every request of a run fails, the run stops: the endpoint is
down or misconfigured, and embedding plain text under an enrichment config would mislabel the results.
A quota-exhausted answer or an unreachable endpoint stops the run at once (LLMStoppedError); what was
answered before is cached.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kbench.enrichment.asking import ask_once_per_prompt
from kbench.enrichment.config import EnrichmentConfig
from kbench.llm import Endpoint, LLMClient, LLMError, LLMPolicy, UsageMeter
from kbench.records import Chunk, Document

# The Archon replication guide's contextual-embedding prompt, as production sends it (one user message).
CONTEXT_PROMPT = (
    "<document>\n{document}\n</document>\n"
    "<chunk>\n{chunk}\n</chunk>\n"
    "Please provide a short context to situate this chunk within the document."
)
SEPARATOR = "\n---\n"


class EnrichmentError(LLMError):
    """Every enrichment request failed: the endpoint or model is wrong."""


def context_prompt(document_text: str, chunk_text: str, document_chars: int = 5000) -> str:
    return CONTEXT_PROMPT.format(document=document_text[:document_chars], chunk=chunk_text)


def contextual_text(context: str, chunk_text: str) -> str:
    return f"{context}{SEPARATOR}{chunk_text}"


def endpoint(config: EnrichmentConfig) -> Endpoint:
    return Endpoint("enrichment", config.base_url, config.model, config.api_key_env)


def check_enrichment(config: EnrichmentConfig) -> list[Endpoint]:
    """Raise ConfigError at start time when enrichment is on but no endpoint, model or key is configured;
    the endpoints it will call (for ``llm.check_reachable``)."""
    if not config.enabled:
        return []
    endpoint(config).check()
    return [endpoint(config)]


@dataclass
class EnrichmentResult:
    texts: list[str]  # what to embed, row i = chunks[i]
    contexts: list[str | None]  # the LLM's context per chunk (None: failed, plain text kept)
    cache_hits: int = 0
    computed: int = 0
    failed: dict[int, str] = field(default_factory=dict)  # chunk row -> reason
    empty: int = 0  # chunks whose context came back empty (embedded anyway, as production does)

    def counts(self) -> dict[str, int]:
        return {"enrichment_cached": self.cache_hits, "enrichment_computed": self.computed,
                "enrichment_failed": len(self.failed), "enrichment_empty": self.empty}


def all_requests_failed(n: int, first: str) -> EnrichmentError:
    return EnrichmentError(f"enrichment: all {n} LLM requests failed (first: {first}); check "
                           "enrichment.base_url and enrichment.model, or disable enrichment")


def enrich_chunks(chunks: list[Chunk], documents: list[Document], config: EnrichmentConfig,
                  cache_root: Path, *, policy: LLMPolicy | None = None,
                  meter: UsageMeter | None = None) -> EnrichmentResult:
    """Situate every chunk through the one LLM client (kbench.llm): cached, retried, counted in ``meter``.

    A quota or unreachable endpoint stops the run at once (LLMStoppedError); the answers received before
    are cached, so the next run resumes from them."""
    by_id = {d.doc_id: d for d in documents}
    prompts = [context_prompt(by_id[c.doc_id].text, c.text, config.document_chars) for c in chunks]
    policy = (policy or LLMPolicy()).model_copy(update={"concurrency": config.concurrency})
    client = LLMClient(endpoint(config), stage="enrichment", policy=policy, cache_root=cache_root, meter=meter,
                       cache_params={"purpose": "contextual_enrichment", "prompt_template": CONTEXT_PROMPT})
    asked = ask_once_per_prompt(client, prompts, max_tokens=config.max_tokens, all_failed=all_requests_failed,
                                fix="set enrichment.model to a model that writes a context for the chunk, or "
                                    "disable enrichment")
    contexts = [asked.answers.get(prompt) for prompt in prompts]  # None: failed, the plain text is kept
    texts = [chunk.text if context is None else contextual_text(context, chunk.text)
             for chunk, context in zip(chunks, contexts)]
    return EnrichmentResult(texts, contexts, cache_hits=asked.cache_hits, computed=asked.computed,
                            failed=asked.failed_rows(prompts), empty=asked.empty)
