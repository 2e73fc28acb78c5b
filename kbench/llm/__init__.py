"""One OpenAI-compatible client for every LLM and API stage (chat and embeddings).

Stable API (used by enrichment, the llm reranker, the openai embedding provider, query rewriting, ragas):

- ``Endpoint(section, base_url, model, api_key_env)``: where to send; ``check()`` names what is missing.
- ``LLMClient(endpoint, stage=..., policy=LLMPolicy(), cache_root=..., meter=UsageMeter())``:
  ``chat(prompt, max_tokens=, temperature=, system=) -> str``, ``chat_many(prompts, ...) -> ChatBatchResult``,
  ``embed(texts, dimensions=, batch_size=) -> EmbeddingBatchResult``.
- ``UsageMeter.metrics(prices)``: ``llm_<stage>_<requests|cache_hits|retries|failures|unusable_answers|
  prompt_tokens|completion_tokens|cost_usd>`` and ``llm_total_*``; ``LLMClient.count_unusable(n)`` is how a
  stage records answers it received but could not use.
- Errors: ``LLMError``; stops: ``QuotaExhaustedError``, ``EndpointUnreachableError``, ``AuthenticationError``;
  ``LLMStoppedError`` when a stage stopped part-way with what finished kept.
"""
from kbench.llm.cache import ResponseCache
from kbench.llm.client import LLMClient, stop_error
from kbench.llm.config import LLMConfig, LLMPolicy, ModelPrice
from kbench.llm.endpoint import Endpoint
from kbench.llm.errors import (AuthenticationError, EndpointUnreachableError, LLMError, LLMStoppedError,
                               QuotaExhaustedError)
from kbench.llm.results import ChatBatchResult, EmbeddingBatchResult, Failure
from kbench.llm.usage import UsageMeter

__all__ = ["AuthenticationError", "ChatBatchResult", "EmbeddingBatchResult", "Endpoint", "EndpointUnreachableError",
           "Failure", "LLMClient", "LLMConfig", "LLMError", "LLMPolicy", "LLMStoppedError", "ModelPrice",
           "QuotaExhaustedError", "ResponseCache", "UsageMeter", "stop_error"]
