"""Contextual embeddings (reference 000 §3, reference 002's prompt): an LLM situates each chunk in its document.

For each chunk the LLM sees the document's first ``document_chars`` characters (5,000 in production) and
the chunk, and answers with a short context; the text embedded is ``context + "\\n---\\n" + chunk``.
Keyword legs and rerankers keep seeing the plain chunk text.

Every answer is cached by its exact prompt (which holds the chunk and the document prefix) within a
namespace of model, endpoint and max_tokens, so a re-run never asks the LLM twice. The enriched text is
what the embedding cache hashes, so vectors of plain and enriched chunks never mix.

A chunk whose request fails keeps its plain text (production's fallback) and is counted; its answer is
not cached, so the next run retries it. If every request of a run fails, the run stops: the endpoint is
down or misconfigured, and embedding plain text under an enrichment config would mislabel the results.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from kbench.enrichment.config import EnrichmentConfig
from kbench.enrichment.chat import ChatCache, ChatClient, ChatSettings
from kbench.records import Chunk, Document

# Reference 002's contextual-embedding prompt, as production sends it (one user message).
CONTEXT_PROMPT = (
    "<document>\n{document}\n</document>\n"
    "<chunk>\n{chunk}\n</chunk>\n"
    "Please provide a short context to situate this chunk within the document."
)
SEPARATOR = "\n---\n"


class EnrichmentError(RuntimeError):
    pass


def context_prompt(document_text: str, chunk_text: str, document_chars: int = 5000) -> str:
    return CONTEXT_PROMPT.format(document=document_text[:document_chars], chunk=chunk_text)


def contextual_text(context: str, chunk_text: str) -> str:
    return f"{context}{SEPARATOR}{chunk_text}"


def chat_settings(config: EnrichmentConfig) -> ChatSettings:
    return ChatSettings("enrichment", config.base_url, config.model, config.api_key_env, max_tokens=config.max_tokens)


def check_enrichment(config: EnrichmentConfig) -> None:
    """Raise ConfigError at start time when enrichment is on but no endpoint, model or key is configured."""
    if config.enabled:
        chat_settings(config).check()


@dataclass
class EnrichmentResult:
    texts: list[str]  # what to embed, row i = chunks[i]
    contexts: list[str | None]  # the LLM's context per chunk (None: failed, plain text kept)
    cache_hits: int = 0
    computed: int = 0
    failed: dict[int, str] = field(default_factory=dict)  # chunk row -> reason

    def counts(self) -> dict[str, int]:
        return {"enrichment_cached": self.cache_hits, "enrichment_computed": self.computed,
                "enrichment_failed": len(self.failed)}


def enrich_chunks(chunks: list[Chunk], documents: list[Document], config: EnrichmentConfig,
                  cache_root: Path) -> EnrichmentResult:
    settings = chat_settings(config)
    settings.check()
    by_id = {d.doc_id: d for d in documents}
    prompts = [context_prompt(by_id[c.doc_id].text, c.text, config.document_chars) for c in chunks]
    cache = ChatCache(cache_root, {"purpose": "contextual_enrichment", "prompt_template": CONTEXT_PROMPT,
                                   **settings.namespace()})
    answers: dict[str, str] = {}
    todo: list[str] = []
    for p in dict.fromkeys(prompts):  # unique, in order
        cached = cache.get(p)
        if cached is None:
            todo.append(p)
        else:
            answers[p] = cached
    hits = len(answers)
    errors: dict[str, str] = {}
    if todo:
        client = ChatClient(settings)

        def ask(prompt: str) -> None:
            try:
                answer = client.complete(prompt)
            except Exception as e:  # recorded per chunk; the key is never part of these messages
                errors[prompt] = f"{type(e).__name__}: {e}"
                return
            answers[prompt] = answer
            cache.put(prompt, answer)

        try:
            with ThreadPoolExecutor(max_workers=config.concurrency) as pool:
                list(pool.map(ask, todo))
        finally:
            cache.flush()  # answers already received survive an interrupted run
        if len(errors) == len(todo):
            first = next(iter(errors.values()))
            raise EnrichmentError(f"enrichment: all {len(todo)} LLM requests failed (first: {first}); check "
                                  f"enrichment.base_url and enrichment.model, or disable enrichment")
    texts, contexts, failed = [], [], {}
    for row, (chunk, prompt) in enumerate(zip(chunks, prompts)):
        if prompt in answers:
            contexts.append(answers[prompt])
            texts.append(contextual_text(answers[prompt], chunk.text))
        else:
            contexts.append(None)
            texts.append(chunk.text)
            failed[row] = errors.get(prompt, "no answer")
    return EnrichmentResult(texts, contexts, cache_hits=hits, computed=len(todo) - len(errors), failed=failed)
