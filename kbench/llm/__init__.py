"""One OpenAI-compatible client for every LLM and API stage (chat and embeddings).

Stable API (used by enrichment, the llm reranker, the openai embedding provider, query rewriting, ragas):

- ``Endpoint(section, base_url, model, api_key_env)``: where to send; ``check()`` names what is missing.
- ``LLMClient(endpoint, stage=..., policy=LLMPolicy(), cache_root=..., meter=UsageMeter())``:
  ``chat(prompt, max_tokens=, temperature=, system=) -> str``, ``chat_many(prompts, ...) -> ChatBatchResult``,
  ``embed(texts, dimensions=, batch_size=) -> EmbeddingBatchResult``.
- ``UsageMeter.metrics(prices)``: ``llm_<stage>_<requests|cache_hits|retries|failures|unusable_answers|
  prompt_tokens|completion_tokens|cost_usd>`` and ``llm_total_*``; ``LLMClient.count_unusable(n)`` is how a
  stage records answers it received but could not use.
- ``check_reachable(endpoints, policy)``: before any work, each endpoint connects and takes its key.
- Errors: ``LLMError``; stops: ``QuotaExhaustedError``, ``EndpointUnreachableError``, ``AuthenticationError``;
  ``LLMStoppedError`` when a stage stopped part-way with what finished kept.
"""
from kbench.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".cache": ["ResponseCache"],
    ".client": ["LLMClient", "check_reachable", "stop_error"],
    ".config": ["LLMConfig", "LLMPolicy", "ModelPrice"],
    ".endpoint": ["Endpoint"],
    ".errors": ["AuthenticationError", "EndpointUnreachableError", "LLMError", "LLMStoppedError",
                "QuotaExhaustedError"],
    ".results": ["ChatBatchResult", "EmbeddingBatchResult", "Failure"],
    ".usage": ["UsageMeter"],
})
