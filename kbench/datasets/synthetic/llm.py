"""``llm``: span-anchored generation. The model reads an excerpt, writes a question it answers and quotes the
passage that answers it; the quote is located in the document and becomes the reference span.

Excerpts are the corpus's passages (``leakage.split_passages``, at least 200 characters, cut at
``max_excerpt_chars``), sampled like every method's proposals (seeded, stratified, ``--per-doc``, ``--max``)
*before* any request, so the model is asked only about the excerpts kept. The answer must read

    Question: <one question>
    Quote: <text copied from the excerpt>

(a JSON object with ``question`` and ``quote`` is accepted too). The quote is located in the excerpt:
exactly, then with whitespace and markdown marks ignored, then fuzzily (rapidfuzz's best partial alignment,
score at least ``min_fuzzy_score``). A quote that cannot be located, an answer that does not parse, a quote
under 3 words or a failed request is rejected and counted by reason. Nothing is removed from the indexed
copy: the question is the model's own words. Answers are cached by the shared LLM client (``kbench.llm``)
as they arrive: a re-run, or a run after a kill, with the same model, prompt and excerpts asks only what is
missing. An answer that gives no located question is unusable: below ``llm.policy.min_usable`` (80%) of the
excerpts the build stops early with the count, the model and the fix (kbench/llm/usable.py), before the
whole batch is paid for; a stopped endpoint (down, quota, refused key) stops it too.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from rapidfuzz import fuzz

from kbench.datasets.synthetic.base import Proposal, Proposals
from kbench.datasets.synthetic.leakage import split_passages
from kbench.datasets.synthetic.prose import headings, section_of
from kbench.hashing import sha256_text
from kbench.llm import LLMClient, stop_error
from kbench.records import Document

NAME = "llm"
DEFAULTS = {"max_excerpt_chars": 1500, "min_fuzzy_score": 85.0, "max_tokens": 200}
PROMPT = """You write evaluation questions for a search system over documentation.
Read the excerpt, write ONE question a user could ask that the excerpt answers, and copy the exact
sentence(s) of the excerpt that answer it. Do not copy the question's words from the excerpt if you can
rephrase them.

<excerpt>
{excerpt}
</excerpt>

Reply with exactly two lines:
Question: <the question>
Quote: <the exact text from the excerpt that answers it>"""
PROMPT_SHA256 = sha256_text(PROMPT)
MIN_QUOTE_WORDS = 3


def excerpts(document: Document, params: dict[str, Any]) -> Proposals:
    """One proposal per passage (no question yet): the excerpt's range and its section as stratum."""
    found = Proposals()
    if not document.text.strip():
        return found
    heads = headings(document.text) if document.doc_type != "commit" else []
    for p in split_passages(document.doc_id, document.text):
        end = min(p.end, p.start + params["max_excerpt_chars"])
        if len(document.text[p.start:end].split()) < 20:
            found.rejected["excerpt_too_short"] += 1
            continue
        found.items.append(Proposal(document.doc_id, "", p.start, end, None, stratum=section_of(p.start, heads),
                                    group=f"excerpt@{p.start}"))
    return found


def parse_answer(answer: str) -> tuple[str, str] | None:
    """(question, quote) from the model's answer, or None."""
    text = answer.strip()
    fenced = re.search(r"\{.*\}", text, re.DOTALL)
    if fenced:
        try:
            data = json.loads(fenced.group(0))
            if isinstance(data, dict) and isinstance(data.get("question"), str) and isinstance(data.get("quote"), str):
                return data["question"].strip(), data["quote"].strip()
        except ValueError:
            pass
    q = re.search(r"(?im)^\s*\**question\s*:?\**\s*:?\s*(.+)$", text)
    m = re.search(r"(?ims)^\s*\**quote\s*:?\**\s*:?\s*(.+)", text[q.end():] if q else text)
    if not q or not m:
        return None
    quote = m.group(1).strip().strip('"“”').strip()
    return " ".join(q.group(1).split()), quote


def _loose(text: str) -> tuple[str, list[int]]:
    """Lowercased text without whitespace and markdown marks, with each kept character's original offset."""
    kept, where = [], []
    for i, ch in enumerate(text):
        if ch.isspace() or ch in "*_`#>\"'“”‘’":
            continue
        kept.append(ch.lower())
        where.append(i)
    return "".join(kept), where


def locate(quote: str, text: str, start: int, end: int, min_fuzzy_score: float) -> tuple[int, int, str] | None:
    """The quote's (start, end) in ``text`` within ``[start, end)``, and how it was found (exact/loose/fuzzy)."""
    region = text[start:end]
    at = region.find(quote)
    if at >= 0:
        return start + at, start + at + len(quote), "exact"
    loose_region, where = _loose(region)
    loose_quote, _ = _loose(quote)
    if not loose_quote:
        return None
    at = loose_region.find(loose_quote)
    if at >= 0:
        return start + where[at], start + where[at + len(loose_quote) - 1] + 1, "loose"
    alignment = fuzz.partial_ratio_alignment(loose_quote, loose_region)
    if alignment is None or alignment.score < min_fuzzy_score or alignment.dest_end <= alignment.dest_start:
        return None
    return start + where[alignment.dest_start], start + where[alignment.dest_end - 1] + 1, "fuzzy"


@dataclass
class Generated:
    proposals: dict[str, list[Proposal]]
    rejected: Counter
    located: Counter  # exact / loose / fuzzy
    cache_hits: int
    requests: int


FIX = ("use a model that follows the two-line format and quotes the excerpt (--model), or a heuristic method "
       "(--method heading or ict)")


def read_answer(document: Document, p: Proposal, answer: str, params: dict[str, Any]
                ) -> tuple[Proposal | None, str, str]:
    """(the located question, or None; the rejection reason; how the quote was found)."""
    parsed = parse_answer(answer)
    if parsed is None or not parsed[0]:
        return None, "answer_not_parsed", ""
    question, quote = parsed
    if len(quote.split()) < MIN_QUOTE_WORDS:
        return None, "quote_too_short", ""
    found = locate(quote, document.text, p.ref_start, p.ref_end, params["min_fuzzy_score"])
    if found is None:
        return None, "quote_not_located", ""
    start, end, how = found
    return Proposal(p.doc_id, question, start, end, None, p.stratum, p.group,
                    metadata={"generation": {"located": how, "excerpt": [p.ref_start, p.ref_end],
                                             "answer_sha256": sha256_text(answer)}}), "", how


def generate(documents: dict[str, Document], chosen: list[Proposal], client: LLMClient,
             params: dict[str, Any]) -> Generated:
    """Ask the model about every chosen excerpt; keep the questions whose quote is found. Stops (exit 2) when
    the endpoint stops or too few answers give a question (``llm.policy.min_usable``)."""
    prompts = [PROMPT.format(excerpt=documents[p.doc_id].text[p.ref_start:p.ref_end]) for p in chosen]
    by_prompt = dict(zip(prompts, chosen))

    def usable(prompt: str, answer: str) -> bool:
        p = by_prompt[prompt]
        return read_answer(documents[p.doc_id], p, answer, params)[0] is not None

    batch = client.chat_many(prompts, max_tokens=params["max_tokens"], temperature=0.0, usable=usable)
    if batch.stopped is not None:  # the endpoint, not the documents: down, out of quota, refusing the key
        raise stop_error(client.endpoint.section, batch.stopped, batch.success_count, len(prompts))
    rejected, located, out = Counter(), Counter(), {}
    attempted = {f.index for f in batch.failed_items if f.attempts}  # not those a stop left unasked
    for i, p in enumerate(chosen):
        answer = batch.answers.get(i)
        if answer is None:
            if i in attempted:
                rejected["llm_request_failed"] += 1
            continue
        proposal, reason, how = read_answer(documents[p.doc_id], p, answer, params)
        if proposal is None:
            rejected[reason] += 1
            continue
        located[how] += 1
        out.setdefault(p.doc_id, []).append(proposal)
    reasons = ", ".join(f"{n} {r}" for r, n in rejected.most_common())
    client.require_usable(len(prompts), sum(located.values()), batch=batch,
                          fix=f"{FIX}; rejected: {reasons}" if reasons else FIX)
    return Generated(out, rejected, located, batch.cache_hits, len(prompts) - batch.cache_hits)
