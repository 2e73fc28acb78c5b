"""ragas context metrics on any run (``evaluation.ragas: [metric, ...]``), and a run as a ragas EvaluationDataset.

Names (config) -> ragas 0.4.3 metric:
- ``id_context_precision`` / ``id_context_recall``: IDBasedContextPrecision / IDBasedContextRecall over
  document ids (offline);
- ``nonllm_context_precision`` / ``nonllm_context_recall``: NonLLMContextPrecisionWithReference /
  NonLLMContextRecall, string similarity (rapidfuzz) between retrieved and reference texts (offline);
- ``llm_context_precision`` / ``llm_context_recall``: LLMContextPrecisionWithReference / LLMContextRecall,
  judged by the chat model at ``evaluation.ragas_llm`` (any OpenAI-compatible endpoint, ``kbench serve``
  included), through kbench's one LLM client: cached, retried, counted as stage ``ragas``.

What a query hands to ragas (``ragas_sample``): the top ``evaluation.ragas_k`` chunks (default: the largest
``evaluation.k``) as ``retrieved_contexts``, their document ids as ``retrieved_context_ids``; the reference
span texts (span datasets) or the relevant documents' texts (BEIR qrels, grade > 0) as
``reference_contexts``, their document ids as ``reference_context_ids``; ``reference`` (the answer the LLM
metrics compare against) is the reference contexts joined, since the datasets carry no written answers.

Where ragas and kbench agree (tests/evaluation/test_ragas.py checks it to 1e-9 on real runs):
- ``id_context_recall`` = kbench ``doc_recall_at_<ragas_k>`` always: both count relevant documents found
  among the distinct documents of the top k, over the relevant documents.
- ``id_context_precision`` = kbench ``doc_precision_at_<ragas_k>`` when the top k chunks hold at least k
  distinct documents. They differ otherwise: ragas divides by the number of distinct retrieved ids (a set),
  kbench by k (trec_eval's P_k, which does not reward a short list); with chunks, several chunks of one
  document make the set smaller than k. A query with nothing retrieved is NaN in ragas, 0 in kbench.
A ragas score of NaN (an LLM answer it could not parse, or a request that failed after the client's retries)
is kept as NaN per query and left out of the mean; never silently: each unusable answer is counted in the
run's meter (``llm_ragas_unusable_answers``), each failed request in ``llm_ragas_failures``. ragas' own retry
loop is switched off (one attempt): kbench's client already retries, and ragas would otherwise retry a stopped
endpoint ten times with waits of up to a minute. A quota or unreachable endpoint stops the run (LLMStoppedError).
Fewer usable LLM-judged scores than ``llm.policy.min_usable`` (80%) stop the run with the count, the model and
the fix (kbench/llm/usable.py), as soon as the floor can no longer be met; progress shows on stderr.

ragas is imported when these metrics run (a heavy import; RAGAS_DO_NOT_TRACK=true is set first so it sends
no usage data).
"""
from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from kbench.evaluation.config import EvaluationConfig
from kbench.llm import (AuthenticationError, Endpoint, EndpointUnreachableError, LLMClient, LLMError, LLMPolicy,
                        LLMStoppedError, QuotaExhaustedError, UsageMeter)
from kbench.llm.progress import AnswerProgress
from kbench.llm.usable import most_bad_allowed
from kbench.records import Chunk, Dataset, Run

OFFLINE = ("id_context_precision", "id_context_recall", "nonllm_context_precision", "nonllm_context_recall")
LLM_JUDGED = ("llm_context_precision", "llm_context_recall")
RAGAS_METRIC_NAMES = OFFLINE + LLM_JUDGED
REFERENCE_CHARS = 2000  # characters of each reference document handed to ragas (BEIR abstracts fit)
STOPS = (LLMStoppedError, QuotaExhaustedError, EndpointUnreachableError, AuthenticationError)  # end the run


def import_ragas():
    os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
    import ragas  # noqa: F401  (heavy; only when ragas metrics run)

    return ragas


@dataclass
class RagasSample:
    user_input: str
    retrieved_contexts: list[str]
    retrieved_context_ids: list[str]
    reference_contexts: list[str]
    reference_context_ids: list[str]
    reference: str

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def ragas_sample(dataset: Dataset, chunks_by_id: dict[str, Chunk], run: Run, query, k: int) -> RagasSample:
    hits = run[query.query_id][:k]
    docs = {d.doc_id: d for d in dataset.documents}
    if dataset.has_spans:
        spans = dataset.spans.get(query.query_id, [])
        references = [docs[s.doc_id].text[s.start : s.end] for s in spans if s.doc_id in docs]
        reference_ids = [s.doc_id for s in spans if s.doc_id in docs]
    else:
        relevant = [d for d, g in dataset.qrels.get(query.query_id, {}).items() if g > 0 and d in docs]
        references = [docs[d].text[:REFERENCE_CHARS] for d in relevant]
        reference_ids = relevant
    return RagasSample(
        user_input=query.text,
        retrieved_contexts=[chunks_by_id[h.chunk_id].text for h in hits],
        retrieved_context_ids=[h.doc_id for h in hits],
        reference_contexts=references, reference_context_ids=reference_ids,
        reference="\n".join(references),
    )


def to_ragas_dataset(dataset: Dataset, chunks: list[Chunk], run: Run, k: int = 10):
    """The run as a ragas ``EvaluationDataset`` (one SingleTurnSample per query of the dataset)."""
    import_ragas()
    from ragas import EvaluationDataset
    from ragas.dataset_schema import SingleTurnSample

    by_id = {c.chunk_id: c for c in chunks}
    return EvaluationDataset(samples=[SingleTurnSample(**ragas_sample(dataset, by_id, run, q, k).as_dict())
                                      for q in dataset.queries])


def ragas_llm(client: LLMClient, max_tokens: int):
    """A ragas LLM that sends every prompt through kbench's client (cache, retries, usage)."""
    import_ragas()
    from langchain_core.outputs import Generation, LLMResult
    from ragas.llms.base import BaseRagasLLM
    from ragas.run_config import RunConfig

    @dataclass
    class KbenchRagasLLM(BaseRagasLLM):
        def generate_text(self, prompt, n=1, temperature=0.01, stop=None, callbacks=None):
            answers = [client.chat(prompt.to_string(), max_tokens=max_tokens, temperature=0.0) for _ in range(n)]
            return LLMResult(generations=[[Generation(text=a) for a in answers]])

        async def agenerate_text(self, prompt, n=1, temperature=0.01, stop=None, callbacks=None):
            return await asyncio.to_thread(self.generate_text, prompt, n, temperature, stop, callbacks)

        def is_finished(self, response) -> bool:
            return True

    return KbenchRagasLLM(run_config=RunConfig(max_retries=1))  # one attempt: the client retries


def ragas_metric(name: str, llm=None):
    import_ragas()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from ragas.metrics import (IDBasedContextPrecision, IDBasedContextRecall, LLMContextPrecisionWithReference,
                                   LLMContextRecall, NonLLMContextPrecisionWithReference, NonLLMContextRecall)
    make = {"id_context_precision": IDBasedContextPrecision, "id_context_recall": IDBasedContextRecall,
            "nonllm_context_precision": NonLLMContextPrecisionWithReference,
            "nonllm_context_recall": NonLLMContextRecall,
            "llm_context_precision": LLMContextPrecisionWithReference, "llm_context_recall": LLMContextRecall}
    metric = make[name]()
    if name in LLM_JUDGED:
        metric.llm = llm
    return metric


@dataclass
class JudgedScores:
    """How the LLM-judged scores went: asked, unusable (ragas could not use the answer), failed (no answer)."""

    asked: int = 0
    unusable: int = 0
    failed: int = 0

    @property
    def usable(self) -> int:
        return self.asked - self.unusable - self.failed


def score_samples(samples: list[RagasSample], names: list[str], llm=None,
                  give_up: Callable[[JudgedScores, int], None] | None = None,
                  label: str = "ragas") -> tuple[pd.DataFrame, JudgedScores]:
    """One row per sample, a ``ragas_<name>`` column per metric (NaN where ragas gives none), and how the
    LLM-judged scores went (an answer ragas could not use: unparsable, or no verdict to average; a request that
    failed). ``give_up(counts, total)`` is called after each LLM-judged score and may raise (the floor).
    A stopped endpoint (quota, unreachable, refused key) raises."""
    import_ragas()
    from ragas.dataset_schema import SingleTurnSample

    metrics = {name: ragas_metric(name, llm) for name in names}
    counts = JudgedScores()
    judged = [n for n in names if n in LLM_JUDGED]
    total = sum(len(judged) for s in samples if s.retrieved_contexts and s.reference_contexts)
    shown = AnswerProgress(label, total, enabled=bool(judged))
    shown.start()

    async def score_all():
        rows = []
        for sample in samples:
            ragas_sample_ = SingleTurnSample(**sample.as_dict())
            row = {}
            for name, metric in metrics.items():
                if not sample.retrieved_contexts or not sample.reference_contexts:
                    row[f"ragas_{name}"] = np.nan  # ragas asserts on empty lists
                    continue
                failed = bad = False
                try:
                    score = float(await metric.single_turn_ascore(ragas_sample_))
                except STOPS:
                    raise
                except LLMError:  # failed after the client's retries: counted as a failure by the client
                    score, failed = np.nan, True
                except Exception:  # noqa: BLE001 - an LLM answer ragas cannot parse: NaN for this query
                    score, bad = np.nan, True
                else:
                    bad = bool(np.isnan(score))  # parsed, but nothing to score
                row[f"ragas_{name}"] = score
                if name in LLM_JUDGED:
                    counts.asked += 1
                    counts.failed += failed
                    counts.unusable += bad
                    shown.add(usable=not bad, failed=failed)
                    if give_up is not None:
                        give_up(counts, total)
            rows.append(row)
        return rows

    try:
        frame = pd.DataFrame(asyncio.run(score_all()), columns=[f"ragas_{n}" for n in names])
    finally:
        shown.close()
    return frame, counts


@dataclass
class RagasScores:
    per_query: pd.DataFrame  # ragas_<name> columns, one row per dataset query
    usage: UsageMeter = field(default_factory=UsageMeter)


def ragas_endpoint(config: EvaluationConfig) -> Endpoint:
    llm = config.ragas_llm
    return Endpoint("evaluation.ragas_llm", llm.base_url, llm.model, llm.api_key_env)


def check_ragas(config: EvaluationConfig) -> list[Endpoint]:
    """Fail before any work when LLM-judged ragas metrics are asked for and no endpoint is configured; the
    endpoints it will call (for ``llm.check_reachable``)."""
    if not any(name in LLM_JUDGED for name in config.ragas):
        return []
    ragas_endpoint(config).check()
    return [ragas_endpoint(config)]


def evaluate_ragas(dataset: Dataset, chunks: list[Chunk], run: Run, config: EvaluationConfig, *,
                   cache_root: Path | None = None, meter: UsageMeter | None = None,
                   policy: LLMPolicy | None = None) -> pd.DataFrame:
    """``ragas_<name>`` per query for ``config.ragas`` (rows in the dataset's query order)."""
    names = list(config.ragas)
    if not names:
        return pd.DataFrame(index=range(len(dataset.queries)))
    k = config.ragas_k or max(config.k)
    by_id = {c.chunk_id: c for c in chunks}
    samples = [ragas_sample(dataset, by_id, run, q, k) for q in dataset.queries]
    llm, client = None, None
    if any(n in LLM_JUDGED for n in names):
        client = LLMClient(ragas_endpoint(config), stage="ragas", policy=policy, cache_root=cache_root,
                           meter=meter, cache_params={"purpose": "ragas"})
        llm = ragas_llm(client, config.ragas_llm.max_tokens)
    fix = "set evaluation.ragas_llm.model to a model that follows ragas' prompts, or use the id_/nonllm_ metrics"
    counted = 0

    def give_up(counts: JudgedScores, total: int) -> None:  # the floor, as soon as it can no longer be met
        nonlocal counted
        client.count_unusable(counts.unusable - counted)
        counted = counts.unusable
        bad = counts.unusable + counts.failed
        if not client.policy.allow_partial and bad > most_bad_allowed(total, client.policy.min_usable):
            client.require_usable(total, counts.usable, counts.failed, fix=fix, asked=counts.asked)

    try:
        scores, counts = score_samples(samples, names, llm, give_up if client is not None else None,
                                       label=f"evaluation.ragas_llm ({config.ragas_llm.model})")
    finally:
        if client is not None:
            client.close()
    if client is not None:
        client.require_usable(counts.asked, counts.usable, counts.failed, fix=fix)
    return scores
