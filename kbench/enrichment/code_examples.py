"""Archon's code-example index ("agentic RAG"): code blocks with an LLM summary each.

Extraction is the Archon replication guide's rule, applied to every document's text as production applies it to a crawled
page: the pattern ```` ```(\\w+)?\\n(.*?)\\n``` ```` (non-greedy, across lines), a block kept when its code
(between the fences, fences and newlines excluded) is longer than ``min_code_chars`` (250), its language the
fence's word or ``unknown``. The pattern's quirks are kept, as production has them:
- an opening fence with more than one word (```` ```python title="x" ````) or a non-word language
  (```` ```c++ ````) does not open a block there; the search goes on from the next character, so a closing
  fence can later open a "block" that is the prose up to the next fence;
- fences are not anchored to line starts: an indented closing fence does not close a block (it runs on to
  the next ```` \n``` ````), and ``~~~`` fences are never blocks.

Each block becomes one unit (a ``Chunk`` with ``unit="code_example"``): its text is the code, exactly
``document.text[start:end]``, so span metrics read the block's offsets in its page; ``metadata`` holds the
language and the summary. What production embeds, and the ``code_examples`` leg searches, is
``code + "\\n\\nSummary: " + summary`` (the code alone when there is no summary).

Summaries go through the one LLM client (kbench.llm): cached by prompt, retried, counted under stage
``code_examples``. A block whose request fails is indexed with its code alone and counted; so is a block whose
answer is empty (``code_examples_summaries_empty``, ``llm_code_examples_unusable_answers``: a weak model's
habit). If every request fails the run stops (the endpoint or model is wrong). A quota or an unreachable endpoint stops the run at once
(LLMStoppedError) with the answers received so far cached.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from kbench.enrichment.asking import ask_once_per_prompt
from kbench.enrichment.config import CODE_EXAMPLE_UNIT, CodeExamplesConfig
from kbench.llm import Endpoint, LLMClient, LLMError, LLMPolicy, UsageMeter
from kbench.records import Chunk, Document

FENCED_BLOCK = re.compile(r"```(\w+)?\n(.*?)\n```", re.DOTALL)  # the Archon replication guide's pattern, quirks and all
UNKNOWN_LANGUAGE = "unknown"

# kbench's own wording of production's request: what the code does and when to use it, in a few sentences.
SUMMARY_PROMPT = (
    "Summarize this code example in two or three sentences: what it does and when a developer would use it.\n"
    "{context_before}```{language}\n{code}\n```{context_after}"
)
SUMMARY_SEPARATOR = "\n\nSummary: "


class CodeExamplesError(LLMError):
    """Every summary request failed: the endpoint or model is wrong."""


def extract_code_examples(documents: list[Document], min_code_chars: int = 250) -> list[Chunk]:
    """Every fenced block longer than ``min_code_chars`` as a unit; numbered per document in text order."""
    units = []
    for document in documents:
        number = 0
        for match in FENCED_BLOCK.finditer(document.text):
            code = match.group(2)
            if len(code) <= min_code_chars:
                continue
            units.append(Chunk(document.doc_id, number, match.start(2), match.end(2), code,
                               metadata={"language": match.group(1) or UNKNOWN_LANGUAGE,
                                         "fence_start": match.start(), "fence_end": match.end()},
                               unit=CODE_EXAMPLE_UNIT))
            number += 1
    return units


def summary_prompt(unit: Chunk, document_text: str, config: CodeExamplesConfig) -> str:
    """The summary request for one block; with ``context_chars``, the page text around its fences too."""
    before = after = ""
    if config.context_chars:
        fence_start, fence_end = unit.metadata["fence_start"], unit.metadata["fence_end"]
        before = document_text[max(0, fence_start - config.context_chars): fence_start]
        after = document_text[fence_end: fence_end + config.context_chars]
    return SUMMARY_PROMPT.format(context_before=before, language=unit.metadata["language"],
                                 code=unit.text[:config.prompt_code_chars], context_after=after)


def embedded_text(code: str, summary: str | None) -> str:
    """What production embeds for a code example: the code, then its summary."""
    return code if not summary else f"{code}{SUMMARY_SEPARATOR}{summary}"


def endpoint(config: CodeExamplesConfig) -> Endpoint:
    return Endpoint("enrichment.code_examples", config.base_url, config.model, config.api_key_env)


def check_code_examples(config: CodeExamplesConfig) -> list[Endpoint]:
    """Raise ConfigError at start time when LLM summaries are on but no endpoint, model or key is configured;
    the endpoints it will call (for ``llm.check_reachable``)."""
    if not (config.enabled and config.summary == "llm"):
        return []
    endpoint(config).check()
    return [endpoint(config)]


@dataclass
class CodeExamples:
    units: list[Chunk]  # the code examples, metadata["summary"] set (None: failed or summary: none)
    texts: list[str]  # what to embed, row i = units[i]
    cache_hits: int = 0
    computed: int = 0
    failed: dict[int, str] = field(default_factory=dict)  # unit row -> reason
    empty: int = 0  # answers that held no summary (the code alone is embedded)

    def counts(self) -> dict[str, int]:
        return {"code_examples": len(self.units), "code_examples_summaries_cached": self.cache_hits,
                "code_examples_summaries_computed": self.computed,
                "code_examples_summaries_failed": len(self.failed), "code_examples_summaries_empty": self.empty}


def build_code_examples(documents: list[Document], config: CodeExamplesConfig, cache_root: Path, *,
                        policy: LLMPolicy | None = None, meter: UsageMeter | None = None) -> CodeExamples:
    """Extract the blocks and summarize each through the one LLM client (``summary: llm``)."""
    units = extract_code_examples(documents, config.min_code_chars)
    if config.summary == "none" or not units:
        units = [_with_summary(u, None) for u in units]
        return CodeExamples(units, [u.text for u in units])
    by_id = {d.doc_id: d for d in documents}
    prompts = [summary_prompt(u, by_id[u.doc_id].text, config) for u in units]
    policy = (policy or LLMPolicy()).model_copy(update={"concurrency": config.concurrency})
    client = LLMClient(endpoint(config), stage="code_examples", policy=policy, cache_root=cache_root, meter=meter,
                       cache_params={"purpose": "code_example_summary", "prompt_template": SUMMARY_PROMPT})
    asked = ask_once_per_prompt(client, prompts, max_tokens=config.max_tokens, all_failed=all_summaries_failed,
                                fix="set enrichment.code_examples.model to a model that summarizes code, or "
                                    "enrichment.code_examples.summary: none")
    summaries = {prompt: answer.strip() for prompt, answer in asked.answers.items()}
    summarized = [_with_summary(unit, summaries.get(prompt) or None)  # an empty answer: no summary
                  for unit, prompt in zip(units, prompts)]
    return CodeExamples(summarized, [embedded_text(u.text, u.metadata["summary"]) for u in summarized],
                        cache_hits=asked.cache_hits, computed=asked.computed, failed=asked.failed_rows(prompts),
                        empty=asked.empty)


def all_summaries_failed(n: int, first: str) -> CodeExamplesError:
    return CodeExamplesError(
        f"enrichment.code_examples: all {n} summary requests failed (first: {first}); check "
        "enrichment.code_examples.base_url and .model, or set enrichment.code_examples.summary: none")


def _with_summary(unit: Chunk, summary: str | None) -> Chunk:
    return Chunk(unit.doc_id, unit.chunk_number, unit.start, unit.end, unit.text,
                 metadata={**unit.metadata, "summary": summary}, unit=unit.unit)
