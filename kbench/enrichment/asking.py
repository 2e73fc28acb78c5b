"""One LLM request per distinct prompt, for both enrichment stages (contextual enrichment, code-example summaries).

Both stages ask one question per row (a chunk, a code block) and many rows can ask the same thing, so the
batch is asked once per distinct prompt and the answers come back keyed by prompt. The rules they share:
- an answer holding only whitespace is counted in the meter as unusable (``llm_<stage>_unusable_answers``),
  also when the batch then stops: it arrived, like the requests the client counted before the stop;
- a stop (quota, unreachable endpoint, refused key) raises ``LLMStoppedError`` naming the client's section
  and how many answers were kept (they are cached);
- when every request failed the run is refused with the caller's own error: the endpoint or model is wrong;
- when fewer than ``llm.policy.min_usable`` of the prompts got a usable answer (failed or empty), the run
  stops (``UnusableAnswersError``, kbench/llm/usable.py) naming the count, the model and ``fix``, unless
  ``llm.policy.allow_partial``.
What an answer means (stripped, embedded, parsed) stays with the caller.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from kbench.llm import LLMClient, LLMError, stop_error


@dataclass(frozen=True)
class PromptAnswers:
    answers: dict[str, str] = field(default_factory=dict)  # prompt -> answer as received (successes only)
    errors: dict[str, str] = field(default_factory=dict)  # prompt -> why its request failed
    cache_hits: int = 0  # prompts answered from the cache
    computed: int = 0  # prompts answered by the endpoint in this call
    empty: int = 0  # answers holding only whitespace (counted as unusable)

    def failed_rows(self, prompts: list[str]) -> dict[int, str]:
        """Row -> reason, for each row of ``prompts`` whose prompt got no answer."""
        return {row: self.errors.get(prompt, "no answer")
                for row, prompt in enumerate(prompts) if prompt not in self.answers}


def ask_once_per_prompt(client: LLMClient, prompts: list[str], *, max_tokens: int,
                        all_failed: Callable[[int, str], LLMError], fix: str) -> PromptAnswers:
    """Ask ``client`` each distinct prompt once (first-seen order), then close it.

    ``all_failed(n, first_error)`` builds the error raised when all ``n`` requests failed; ``fix`` is what the
    floor's message tells the user to do (kbench.llm.usable)."""
    unique = list(dict.fromkeys(prompts))
    try:
        batch = client.chat_many(unique, max_tokens=max_tokens, usable=lambda prompt, answer: bool(answer.strip()))
    finally:
        client.close()
    if batch.stopped is not None:
        raise stop_error(client.endpoint.section, batch.stopped, batch.success_count, len(unique))
    if unique and not batch.answers:
        raise all_failed(len(unique), batch.failed_items[0].error)
    empty = len(batch.unusable)
    client.require_usable(len(unique), len(batch.answers) - empty, fix=fix, batch=batch)
    return PromptAnswers(answers={unique[i]: a for i, a in batch.answers.items()},
                         errors={unique[f.index]: f.error for f in batch.failed_items},
                         cache_hits=batch.cache_hits,
                         computed=len(unique) - batch.cache_hits - len(batch.failed_items), empty=empty)
