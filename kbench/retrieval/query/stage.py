"""Query pre-stages: rewrite each question (expansion, decomposition, HyDE), search every rewrite, fuse.

``plan_queries`` asks the LLM once per question and stage (through kbench.llm: cached, retried, counted
as stages ``query_expansion``, ``query_decomposition``, ``query_hyde``) and returns, per question, the
texts to search and what each stage made of it. The stages compose in this order: expansion rewrites the
question; decomposition splits the (rewritten) question into parts; HyDE replaces each text searched by
a hypothetical answer, which every leg then searches (embedded by vector legs, matched by keyword legs).

``search_planned`` runs the retrieval stage (kbench.retrieval.stage.search) over every text, then fuses a
decomposed question's parts with RRF (kbench.retrieval.fusion.rrf, legs named ``part1``, ``part2`` ...),
so a hit's leg evidence names the part that found it. A reranker, when on, reranks each part's
candidates against that part's text, before the parts are fused.

A rewrite that fails keeps the text it was given (and says so in the plan); a quota or unreachable
endpoint stops the run (LLMStoppedError) with the answers received so far cached. Fewer usable rewrites than
``llm.policy.min_usable`` (80%) stop the run with the count, the model and the fix (kbench/llm/usable.py):
a run of mostly unrewritten questions would be recorded under a rewriting config.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from kbench.indexes import Index
from kbench.llm import Endpoint, LLMClient, LLMPolicy, UsageMeter, stop_error
from kbench.records import Document, Hit, Query
from kbench.retrieval.config import RerankConfig, RetrievalConfig
from kbench.retrieval.contracts import SearchContext
from kbench.retrieval.fusion.rrf import RRFParams, rrf_fuse
from kbench.retrieval.query.config import QueryConfig, QueryLLM
from kbench.retrieval.query.prompts import (DECOMPOSE_PROMPT, EXPAND_PROMPT, HYDE_PROMPT, expand_with_synonyms,
                                            first_line, parse_parts)
from kbench.retrieval.stage import SearchOutput, search


@dataclass
class QueryPlan:
    searched: dict[str, list[str]]  # query id -> the texts searched (several when decomposed)
    rewrites: dict[str, dict] = field(default_factory=dict)  # query id -> what each pre-stage produced
    failures: int = 0  # rewrites not applied (the text they were given was searched instead)
    unusable: int = 0  # of those, answers that arrived but gave nothing to search (the rest: failed requests)


def check_query(config: QueryConfig) -> list[Endpoint]:
    """Fail before any work when an LLM pre-stage has no endpoint, model or key; the endpoints the stages
    will call (for ``llm.check_reachable``)."""
    called = []
    for name, stage in (("expansion", config.expansion), ("decomposition", config.decomposition),
                        ("hyde", config.hyde)):
        if stage.enabled and (name != "expansion" or config.expansion.strategy == "llm"):
            endpoint(name, stage).check()
            called.append(endpoint(name, stage))
    return called


def endpoint(name: str, stage: QueryLLM) -> Endpoint:
    return Endpoint(f"query.{name}", stage.base_url, stage.model, stage.api_key_env)


def ask_all(name: str, stage: QueryLLM, prompts: list[str], cache_root: Path, policy: LLMPolicy | None,
            meter: UsageMeter, usable: Callable[[str], bool]) -> tuple[dict[int, str], dict[int, str], int]:
    """(answers, errors by prompt index, unusable answers); ``usable(answer)``: it gives something to search.
    Raises LLMStoppedError when the endpoint stops the run, UnusableAnswersError below the floor. Unusable
    answers are counted as ``llm_query_<name>_unusable_answers``."""
    client = LLMClient(endpoint(name, stage), stage=f"query_{name}", policy=policy, cache_root=cache_root,
                       meter=meter, cache_params={"purpose": f"query_{name}"})
    try:
        batch = client.chat_many(prompts, max_tokens=stage.max_tokens, temperature=stage.temperature,
                                 usable=lambda prompt, answer: usable(answer))
    finally:
        client.close()
    if batch.stopped is not None:
        raise stop_error(f"query.{name}", batch.stopped, batch.success_count, len(prompts))
    client.require_usable(len(prompts), len(batch.answers) - len(batch.unusable), batch=batch,
                          fix=f"set query.{name}.model to a model that follows the prompt, or disable query.{name}")
    return batch.answers, {f.index: f.error for f in batch.failed_items}, len(batch.unusable)


def plan_queries(queries: list[Query], config: QueryConfig, cache_root: Path, *, policy: LLMPolicy | None = None,
                 meter: UsageMeter | None = None) -> QueryPlan:
    meter = meter if meter is not None else UsageMeter()
    texts = {q.query_id: q.text for q in queries}
    rewrites: dict[str, dict] = {q.query_id: {} for q in queries}
    failures = unusable = 0
    ids = [q.query_id for q in queries]
    if config.expansion.enabled:
        if config.expansion.strategy == "synonyms":
            for qid in ids:
                texts[qid] = expand_with_synonyms(texts[qid], config.expansion.synonyms)
                rewrites[qid]["expansion"] = texts[qid]
        else:
            answers, errors, bad = ask_all("expansion", config.expansion,
                                           [EXPAND_PROMPT.format(query=texts[qid]) for qid in ids], cache_root, policy,
                                           meter, lambda answer: bool(first_line(answer)))
            for i, qid in enumerate(ids):
                rewritten = first_line(answers.get(i, ""))
                if rewritten:
                    texts[qid] = rewritten
                else:
                    failures += 1
                rewrites[qid]["expansion"] = rewritten or f"failed: {errors.get(i, 'empty answer')}"
            unusable += bad
    searched = {qid: [texts[qid]] for qid in ids}
    if config.decomposition.enabled:
        d = config.decomposition
        answers, errors, bad = ask_all("decomposition", d,
                                       [DECOMPOSE_PROMPT.format(query=texts[qid], max_parts=d.max_parts) for qid in ids],
                                       cache_root, policy, meter, lambda answer: bool(parse_parts(answer, d.max_parts)))
        for i, qid in enumerate(ids):
            parts = parse_parts(answers.get(i, ""), d.max_parts)
            failures += not parts
            rewrites[qid]["decomposition"] = parts or [f"failed: {errors.get(i, 'no parts in the answer')}"]
            searched[qid] = list(dict.fromkeys(([texts[qid]] if d.include_original or not parts else []) + parts))
        unusable += bad
    if config.hyde.enabled:
        flat = [(qid, text) for qid in ids for text in searched[qid]]
        answers, errors, bad = ask_all("hyde", config.hyde, [HYDE_PROMPT.format(query=t) for _, t in flat],
                                       cache_root, policy, meter, lambda answer: bool(answer.strip()))
        hyde: dict[str, list[str]] = {qid: [] for qid in ids}
        for i, (qid, text) in enumerate(flat):
            passage = answers.get(i, "").strip()
            failures += not passage
            hyde[qid].append(passage or text)
        unusable += bad
        for qid in ids:
            rewrites[qid]["hyde"] = hyde[qid]
            searched[qid] = hyde[qid]
    return QueryPlan(searched, rewrites, failures, unusable)


def search_planned(queries: list[Query], plan: QueryPlan, context: SearchContext, config: RetrievalConfig,
                   rerank: RerankConfig | None, *, rrf_k: int = 60, progress: bool = False,
                   documents: list[Document] | None = None,
                   indexes: Mapping[str, Index] | None = None) -> SearchOutput:
    """Search every planned text; fuse a question's parts by RRF. Latency per question = the sum over its parts."""
    parts: list[Query] = []
    owner: dict[str, tuple[str, int]] = {}
    for q in queries:
        for j, text in enumerate(plan.searched[q.query_id]):
            part_id = q.query_id if len(plan.searched[q.query_id]) == 1 else f"{q.query_id}#part{j + 1}"
            parts.append(Query(part_id, text, q.metadata))
            owner[part_id] = (q.query_id, j)
    output = search(parts, context, config, rerank, progress=progress, documents=documents, indexes=indexes)
    rankings: dict[str, list[Hit]] = {}
    grouped: dict[str, dict[str, list[Hit]]] = {q.query_id: {} for q in queries}
    for part in parts:
        qid, j = owner[part.query_id]
        grouped[qid][f"part{j + 1}"] = output.rankings[part.query_id]
    stages: dict[str, dict[str, list[int]]] = {}
    part_ids: dict[str, list[str]] = {q.query_id: [] for q in queries}
    for part in parts:
        part_ids[owner[part.query_id][0]].append(part.query_id)
    for qid, by_part in grouped.items():
        if len(by_part) == 1:
            rankings[qid] = next(iter(by_part.values()))
            if qid in output.stages:
                stages[qid] = output.stages[qid]
        else:
            legs = {name: [(h.chunk_index, h.score) for h in hits] for name, hits in by_part.items()}
            rankings[qid] = rrf_fuse(legs, RRFParams(k=rrf_k), config.top_k)
            # the trace of a decomposed question: each stage's rows over its parts (part order, first seen),
            # then the parts' RRF as its fusion
            trace: dict[str, list[int]] = {}
            for part_id in part_ids[qid]:
                for stage, rows in output.stages.get(part_id, {}).items():
                    trace[stage] = list(dict.fromkeys(trace.get(stage, []) + rows))
            trace["fusion"] = [h.chunk_index for h in rankings[qid]]
            stages[qid] = trace
    index = {p.query_id: i for i, p in enumerate(parts)}
    latency = {}
    for stage, values in output.latency_ms.items():
        latency[stage] = np.array([sum(values[index[p.query_id]] for p in parts if owner[p.query_id][0] == q.query_id)
                                   for q in queries])
    return SearchOutput(rankings, latency, stages, units=output.units)
