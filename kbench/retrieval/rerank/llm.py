"""``llm``: the GWI spec's LLM reranker through any OpenAI-compatible chat endpoint.

The GWI spec sends one prompt per query listing each candidate as ``[i] <first 200 chars>...`` (0-based
indices, although the instruction says "1 = most relevant") and asks for a JSON array of indices in order
of relevance. Its ``applyRanking`` is left unspecified; here it is:
- the longest bracketed list of integers in the answer is the ranking (an answer may echo ``[0]`` labels);
  when every list holds one index and there are several, they are echoed labels (``## [1] ## [2] ...``,
  SmolLM2-135M's usual answer), not a ranking;
- indices out of range and repeats are dropped; candidates the answer leaves out follow in first-stage order;
- an answer with no list, or whose lists name no candidate (``## [10]`` of ten candidates), keeps the
  first-stage order and is counted: ``parse_failures`` here, ``llm_rerank_unusable_answers`` in the run's
  metrics. Fewer usable answers than ``llm.policy.min_usable`` (80%) of the queries stop the run with the
  count, the model and the fix (kbench/llm/usable.py), as soon as the floor can no longer be met: a rerank
  row made mostly of first-stage rankings would be recorded under a rerank name.
Scores are ``n - position`` (n candidates), so the best gets n.

Differences from the TypeScript original, on purpose: the prompt is dedented (the template literal carried
six spaces of source indentation on most lines) and snippets are cut at 200 code points, not UTF-16 units.

With no endpoint, model or key configured the run stops at start time with a message naming what to set;
a rerank config that silently skipped reranking would record unreranked numbers under a rerank name.
Requests go through the one LLM client (kbench.llm): retried with backoff, counted in the run's usage
meter (``SearchContext.llm_meter``), and cached by prompt in the workspace, so re-running a config never
asks twice. A failed request fails the run (a query silently left in first-stage order would mislabel it).
"""
from __future__ import annotations

import re

from pydantic import Field

from kbench.llm import Endpoint, LLMClient
from kbench.llm.progress import AnswerProgress
from kbench.llm.usable import most_bad_allowed
from kbench.records import Hit
from kbench.registry import in_unit
from kbench.retrieval.contracts import Reranker, SearchContext
from kbench.retrieval.registry import RERANKERS
from kbench.retrieval.rerank.common import CandidateParams, apply_scores, split_candidates

INDEX_LIST = re.compile(r"\[\s*\"?\d+\"?(?:\s*,\s*\"?\d+\"?)*\s*,?\s*\]")


class LLMRerankParams(CandidateParams):
    candidate_multiplier: int = Field(4, ge=1, description="top_k x this many candidates (the GWI spec's semantic "
                                      "search: 20 -> 5)", json_schema_extra=in_unit("x top_k"))
    base_url: str | None = Field(None, description="OpenAI-compatible endpoint; default OPENAI_BASE_URL")
    model: str | None = Field(None, description="chat model name at that endpoint")
    api_key_env: str = Field("OPENAI_API_KEY", description="name of the env var holding the key (never the key)")
    snippet_chars: int = Field(200, ge=1, description="characters of each candidate shown (the GWI spec: 200)")
    max_tokens: int = Field(256, ge=1, description="tokens of the model's answer (a list of indices)")
    temperature: float | None = Field(0.0, description="0 for repeatable rankings; None: the endpoint's default")
    timeout_s: float = Field(60.0, gt=0, description="seconds to wait for one answer")


def rerank_prompt(query_text: str, snippets: list[str], snippet_chars: int = 200) -> str:
    listed = "\n".join(f"[{i}] {text[:snippet_chars]}..." for i, text in enumerate(snippets))
    return (f"Query: {query_text}\n\n"
            f"Rank these results by relevance (1 = most relevant):\n{listed}\n\n"
            "Return: JSON array of indices in order of relevance")


def parse_ranking(answer: str, n: int) -> list[int] | None:
    """Candidate indices, best first, from the model's answer; None when it holds no index list."""
    lists = [[int(v) for v in re.findall(r"\d+", m.group(0))] for m in INDEX_LIST.finditer(answer)]
    if not lists:
        return None
    best = max(lists, key=len)  # the first of the longest
    if len(best) == 1 and len(lists) > 1:
        return None  # labels echoed one per line, not an order
    order = list(dict.fromkeys(i for i in best if 0 <= i < n))
    if not order:
        return None
    return order + [i for i in range(n) if i not in set(order)]


def ranking_scores(order: list[int]) -> list[float]:
    """Position-based scores per candidate index: the first in ``order`` gets n, the last 1."""
    n = len(order)
    scores = [0.0] * n
    for position, index in enumerate(order):
        scores[index] = float(n - position)
    return scores


def endpoint(params: LLMRerankParams) -> Endpoint:
    return Endpoint("rerank", params.base_url, params.model, params.api_key_env)


@RERANKERS.register("llm", LLMRerankParams)
class LLMReranker(Reranker):
    """Ask a chat model to order the candidates (the GWI spec's prompt; JSON array of indices)."""

    @staticmethod
    def preflight(params: LLMRerankParams) -> list[Endpoint]:
        endpoint(params).check()
        return [endpoint(params)]

    def __init__(self, context: SearchContext, params: LLMRerankParams):
        self.context, self.params = context, params
        policy = context.llm_policy.model_copy(update={"timeout_s": params.timeout_s})
        self.client = LLMClient(endpoint(params), stage="rerank", policy=policy,
                                cache_root=context.workspace / "cache", meter=context.llm_meter,
                                cache_params={"purpose": "llm_rerank"})
        self.parse_failures = 0
        self.asked = 0
        self.queries = 0
        self.progress = AnswerProgress(f"rerank ({params.model})", 0, enabled=False)

    FIX = "set rerank.params.model to a model that answers with a JSON list of indices, or another rerank.strategy"

    def start(self, queries: int) -> None:
        self.queries = queries
        self.progress = AnswerProgress(f"rerank ({self.params.model})", queries)
        self.progress.start(f", one request per query, at {self.client.endpoint.url}")

    def rerank(self, query_text: str, hits: list[Hit], top_k: int) -> list[Hit]:
        candidates, tail = split_candidates(hits, self.params.max_candidates)
        if not candidates:
            return apply_scores(candidates, [], top_k, tail)
        prompt = rerank_prompt(query_text, [self.context.chunks[h.chunk_index].text for h in candidates],
                               self.params.snippet_chars)
        answer = self.client.chat(prompt, max_tokens=self.params.max_tokens, temperature=self.params.temperature)
        self.asked += 1
        order = parse_ranking(answer, len(candidates))
        self.progress.add(usable=order is not None)
        if order is None:
            self.parse_failures += 1
            self.client.count_unusable()
            order = list(range(len(candidates)))
            policy = self.client.policy
            if not policy.allow_partial and self.parse_failures > most_bad_allowed(self.queries or self.asked,
                                                                                   policy.min_usable):
                self.progress.close("; stopped early: too few usable rankings")
                self.client.require_usable(self.queries, self.asked - self.parse_failures, fix=self.FIX,
                                           asked=self.asked)
        return apply_scores(candidates, ranking_scores(order), top_k, tail)

    def finish(self) -> None:
        self.progress.close()
        self.client.require_usable(self.asked, self.asked - self.parse_failures, fix=self.FIX)
