"""One MLflow trace per question, built after the run from its folder, so MLflow's trace views and its own
retrieval judges (which read a trace's RETRIEVER span) work on a kbench run.

Nothing in the search loop is instrumented: the retrieval stage already records what each stage passed on
(``Run.stages``), each hit's per-leg ranks and scores, and each question's latency per stage; the run folder keeps
them (kbench.tracking.run_records) and this module turns them into spans. A question's trace:

    search (CHAIN)            only when query pre-stages ran: the question in, the ranking's chunk ids out
      query_<stage> (CHAT_MODEL)  query rewriting / HyDE: the prompt sent and the answer (the run counts LLM
                                  tokens per stage, not per question: they are on the run trace below)
    retrieve (RETRIEVER)      the run's ranking, its first ``tracking.traces.max_documents`` documents
                              (page_content, doc_uri, chunk id, offsets, rank, score, each leg's rank): the span
                              MLflow's retrieval judges grade; the trace's root when no pre-stage ran
      embed_query (EMBEDDING)
      leg_<name> (RETRIEVER)  each leg's list
      fusion (RETRIEVER)      the fused candidates (with two legs or more)
      rerank (RERANKER)       the reranked list
      grouping (CHAIN)

Each span lasts what the run measured for that question and stage (``latency_ms_<stage>``; amortized when
``retrieval.latency: batch``); questions are laid out one after another from when the search began. One more
trace per run (``kbench.run``) holds the stages that are not per question (loading, chunking, embedding,
enrichment) with their seconds, and each LLM stage as a CHAT_MODEL span with the run's token counts.

A question's trace is named ``<run> · <question id>``; MLflow's Traces list, whose default columns are input, output
and time, shows ``<run> · <question> (question <id>)`` as its input (``list_preview``), so the traces of an
experiment's runs are told apart there, and the run's own trace reads ``<run> · kbench.run``. It carries its labels as an Expectation
(``expected_retrieved_context``: the reference spans with their text, or the relevant documents with their grade),
the question id and its headline scores, first relevant rank and miss stage in root span attributes
(``kbench.query_id``, ``kbench.scores``), and is linked to the run. Stage spans show the first ``SNIPPET_CHARS`` of each unit's text; the ranking's span shows
what the run folder kept (``run_records.TEXT_CHARS``). Trace and span ids derive from the run folder's name and
the question id, so an export done twice writes each trace once (a trace already in the store, with any
feedback on it, is kept). Cost is kept small on purpose: each trace tag is a row MLflow writes on its own, so
scores are attributes, not tags; expectations go in one transaction (kbench.tracking.mlflow_bulk).
"""
from __future__ import annotations

import base64
import hashlib
import json
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import yaml

from kbench.tracking.mlflow_bulk import log_assessments, set_request_previews
from kbench.tracking.run_page import RESULTS_TABLE, headline_columns
from kbench.tracking.config import TraceSettings
from kbench.tracking.run_records import (CANDIDATES_FILE, FINAL, read_candidates, read_dataset_record, read_prompts,
                                        traced_query_ids)

SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's when built with it: config.yaml in ms

RUN_TRACE = "kbench.run"  # the run's own trace (its stages, its LLM token counts): its name ends with this
NAME_SEPARATOR = " · "  # a trace's name: "<run> · <question id>" or "<run> · kbench.run"
QUERY_TAG = "kbench.query_id"  # the root span attribute (and expectation metadata) naming a trace's question
EXPECTED_CONTEXT = "expected_retrieved_context"
LINK_BATCH = 100  # MLflow links at most 100 traces to a run per call
QUERY_STAGES = {"expansion": "query.expansion", "decomposition": "query.decomposition", "hyde": "query.hyde"}
SNIPPET_CHARS = 200  # of a unit's text in a stage span (the ranking's span, which judges read, has all of it)
PREVIEW_CHARS = 500  # of a trace's Input preview in MLflow's Traces list (it cuts at 1,000 by default)


@dataclass
class TraceReport:
    questions: int = 0  # question traces the run folder asks for (tracking.traces)
    logged: int = 0  # question traces written now
    existing: int = 0  # question traces already in the store (kept as they are)
    run_trace: bool = False  # the run's own trace (kbench.run) is in the store, written now or before
    expectations: int = 0
    seconds: float = 0.0
    trace_ids: dict[str, str] = field(default_factory=dict)  # question id -> trace id

    def counted(self) -> str:
        """What MLflow's Traces tab lists for the run, counted apart: "98 question traces + 1 run trace"."""
        return (f"{self.questions} question trace{'s' if self.questions != 1 else ''}"
                + (f" + 1 run trace ({RUN_TRACE})" if self.run_trace else ""))


def run_label(records: "RunRecords") -> str:
    """The run a trace belongs to, as its name says it: the run's name (a sweep child's is ``<sweep>[<label>]``)
    and its run key's first 8 characters, which tell apart two runs of one name."""
    tracking = records.config.get("tracking") or {}
    name = tracking.get("run_name") or records.config.get("name") or records.folder_name
    key = records.folder_name.rsplit("-", 1)[-1]
    return f"{name} {key[:8]}" if key and key != records.folder_name else str(name)


def trace_name(records: "RunRecords", key: str) -> str:
    """``<run> · <question id>``, or ``<run> · kbench.run`` for the run's own trace: MLflow's Traces tab lists the
    traces of every run of an experiment together, and the name tells them apart on a trace's page and wherever the
    name is shown (MLflow 3.17's Traces list does not show it by default: its columns are input, output, time)."""
    return f"{run_label(records)}{NAME_SEPARATOR}{key}"


def list_preview(records: "RunRecords", key: str, question: str = "") -> str:
    """What MLflow's Traces list shows in its Input column: ``<run> · <question>``, or ``<run> · kbench.run (the
    run's own trace)``. The list's default columns are input, output and time, so the run has to be in one of them
    to tell apart the traces of the runs an experiment holds; the root span's inputs (what judges read) keep the
    question alone."""
    text = f"{question} (question {key})" if key != RUN_TRACE else f"{RUN_TRACE} (the run's own trace: its stages)"
    return f"{run_label(records)}{NAME_SEPARATOR}{text}"[:PREVIEW_CHARS]


def is_run_trace(name: str | None) -> bool:
    """A trace name of a run's own trace (``... · kbench.run``; ``kbench.run`` alone from kbench before 2026-11)."""
    return bool(name) and (name == RUN_TRACE or name.endswith(NAME_SEPARATOR + RUN_TRACE))


def trace_id_for(folder_name: str, key: str) -> str:
    """A trace id derived from the run folder and a question id (MLflow's ``tr-`` + 32 hex)."""
    return "tr-" + hashlib.sha256(f"{folder_name}/{key}".encode()).hexdigest()[:32]


def _span_id(trace_id: str, name: str) -> str:
    return hashlib.sha256(f"{trace_id}/{name}".encode()).hexdigest()[:16]


def _b64(hex_id: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_id)).decode("ascii")


class SpanBuilder:
    """The spans of one trace as MLflow's span dicts (``Span.from_dict``), laid out on a clock in nanoseconds."""

    def __init__(self, trace_id: str):
        self.trace_id = trace_id
        self.spans: list[dict[str, Any]] = []

    def add(self, name: str, span_type: str, parent: str | None, start_ns: int, end_ns: int, *, inputs: Any = None,
            outputs: Any = None, attributes: dict[str, Any] | None = None) -> str:
        span_id = _span_id(self.trace_id, name if parent is None else f"{parent}/{name}")
        attrs = {"mlflow.traceRequestId": json.dumps(self.trace_id), "mlflow.spanType": json.dumps(span_type),
                 "mlflow.spanInputs": json.dumps(inputs, default=str),
                 "mlflow.spanOutputs": json.dumps(outputs, default=str)}
        attrs.update({k: json.dumps(v, default=str) for k, v in (attributes or {}).items()})
        self.spans.append({"trace_id": _b64(self.trace_id[3:]), "span_id": _b64(span_id),
                           "parent_span_id": _b64(parent) if parent else None, "name": name,
                           "start_time_unix_nano": int(start_ns), "end_time_unix_nano": int(max(end_ns, start_ns)),
                           "events": [], "status": {"code": "STATUS_CODE_OK", "message": ""}, "attributes": attrs})
        return span_id


@dataclass
class RunRecords:
    """What the traces are built from, read from one run folder: only the columns they show."""

    folder_name: str
    config: dict[str, Any]
    dataset: dict[str, Any] | None
    per_query: pd.DataFrame  # query_id, latency_ms_<stage>, the query pre-stages' rewrites
    results: dict[str, dict[str, Any]]  # question id -> its row of per_query_results.json (scores, miss stage)
    candidates: pd.DataFrame
    stages: dict[str, Any]
    metrics: dict[str, float]
    prompts: dict[str, dict[str, str]]
    has_candidates: bool = True

    @classmethod
    def read(cls, run_dir: Path) -> "RunRecords":
        run_dir = Path(run_dir)
        read_json = lambda name: json.loads((run_dir / name).read_text(encoding="utf-8"))  # noqa: E731
        schema = pq.read_schema(run_dir / "per_query.parquet").names
        columns = [c for c in schema if c == "query_id" or c.startswith("latency_ms_") or c.startswith("query_")]
        results = {}
        if (run_dir / RESULTS_TABLE).is_file():
            table = read_json(RESULTS_TABLE)
            results = {str(row[0]): dict(zip(table["columns"], row)) for row in table["data"]}
        return cls(run_dir.name, yaml.load((run_dir / "config.yaml").read_text(encoding="utf-8"), Loader=SafeLoader),
                   read_dataset_record(run_dir), pd.read_parquet(run_dir / "per_query.parquet", columns=columns),
                   results, read_candidates(run_dir), read_json("stages.json"), read_json("metrics.json"),
                   read_prompts(run_dir), (run_dir / CANDIDATES_FILE).is_file())

    @cached_property
    def questions(self) -> dict[str, dict[str, Any]]:
        """Question id -> its record in dataset.json (text, expected context)."""
        return {q["query_id"]: q for q in (self.dataset or {}).get("questions", [])}

    @cached_property
    def lists(self) -> dict[str, dict[str, list[dict[str, Any]]]]:
        """Question id -> stage -> its rows of candidates.parquet (as dicts), best first."""
        out: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for row in self.candidates.sort_values(["query_id", "stage", "rank"], kind="stable").to_dict("records"):
            out.setdefault(str(row["query_id"]), {}).setdefault(row["stage"], []).append(row)
        return out

    def traced_ids(self) -> list[str]:
        """The questions the run traced (``tracking.traces``: all up to the cap, a seeded sample beyond), in the run's
        order; none when the folder has no candidates.parquet (traces off, or a folder older than traces). A question
        the run found nothing for still has its trace."""
        if not self.has_candidates:
            return []
        settings = TraceSettings(**(self.config.get("tracking") or {}).get("traces", {}))
        return traced_query_ids([str(q) for q in self.per_query["query_id"]], settings)


def _documents(rows: list[dict[str, Any]], text_chars: int | None = None) -> list[dict[str, Any]]:
    """A stage's rows as MLflow ``Document`` dicts (``text_chars``: the page content cut to that many characters),
    with each hit's rank in each leg where the run folder has it (the ranking's rows)."""
    out = []
    for row in rows:
        metadata: dict[str, Any] = {"doc_uri": row["doc_id"], "chunk_id": row["chunk_id"], "start": int(row["start"]),
                                    "end": int(row["end"]), "rank": int(row["rank"])}
        score = row["score"]
        if score is not None and score == score:
            metadata["score"] = float(score)
        if row.get("leg_ranks"):
            metadata["leg_ranks"] = json.loads(row["leg_ranks"])
        text = row["text"] if text_chars is None else row["text"][:text_chars]
        out.append({"page_content": text, "metadata": metadata, "id": row["chunk_id"]})
    return out


def _ms(row: dict[str, Any], stage: str) -> float:
    value = row.get(f"latency_ms_{stage}")
    return float(value) if value is not None and value == value else 0.0


def _fill(template: str, **values: Any) -> str:
    for key, value in values.items():
        template = template.replace("{" + key + "}", str(value))
    return template


def question_spans(records: RunRecords, qid: str, question: str, row: dict[str, Any], start_ns: int,
                   per_query_rewrite_ms: float) -> tuple[SpanBuilder, int]:
    """One question's spans from ``start_ns``; returns them and when the trace ends."""
    spans = SpanBuilder(trace_id_for(records.folder_name, qid))
    config, by_stage = records.config, records.lists.get(qid, {})
    final = by_stage.get(FINAL, [])
    rewrites = json.loads(row["query_rewrites"]) if isinstance(row.get("query_rewrites"), str) else {}
    searched = list(row["query_searched"]) if row.get("query_searched") is not None else [question]
    query = searched[0] if len(searched) == 1 else searched
    retrieval_stages = [c[len("latency_ms_"):] for c in row if c.startswith("latency_ms_") and c != "latency_ms_total"]
    total_ms = _ms(row, "total") or sum(_ms(row, s) for s in retrieval_stages)
    pre_stages = query_stage_spans(records, rewrites, question, per_query_rewrite_ms)
    root = retrieve = None
    clock = start_ns
    if pre_stages:  # a root above the rewrites and the retrieval; else the retrieval is the root
        root = spans.add("search", "CHAIN", None, start_ns, start_ns + int((per_query_rewrite_ms + total_ms) * 1e6),
                         inputs={"question": question}, outputs={"retrieved": [r["chunk_id"] for r in final]})
        for name, span_type, ms, inputs, outputs, attributes in pre_stages:
            end = clock + int(ms * 1e6)
            spans.add(name, span_type, root, clock, end, inputs=inputs, outputs=outputs, attributes=attributes)
            clock = end
    retrieve = spans.add("retrieve", "RETRIEVER", root, clock, clock + int(total_ms * 1e6),
                         inputs={"question": question} if root is None else {"query": query},
                         outputs=_documents(final),
                         attributes={"kbench.top_k": config.get("retrieval", {}).get("top_k"),
                                     "kbench.documents_shown": len(final)})
    retrieve_end = clock + int(total_ms * 1e6)
    legs = sum(stage.startswith("leg_") for stage in retrieval_stages)
    rerank = config.get("rerank", {})
    for stage in retrieval_stages:
        end = clock + int(_ms(row, stage) * 1e6)
        rows = by_stage.get(stage) or []
        if stage == "embed_query":
            spans.add(stage, "EMBEDDING", retrieve, clock, end, inputs={"input": query},
                      attributes={"mlflow.llm.model": config.get("embedding", {}).get("model", "")})
        elif stage.startswith("leg_") or (stage == "fusion" and legs > 1):  # one leg's fusion passes its list on
            spans.add(stage, "RETRIEVER", retrieve, clock, end, inputs={"query": query},
                      outputs=_documents(rows, text_chars=SNIPPET_CHARS),
                      attributes={"kbench.strategy": config.get("retrieval", {}).get("fusion", {}).get("strategy")}
                      if stage == "fusion" else {})
        elif stage == "rerank":
            spans.add(stage, "RERANKER", retrieve, clock, end,
                      inputs={"query": question, "candidates": len(by_stage.get("fusion", []))},
                      outputs=_documents(rows, text_chars=SNIPPET_CHARS),
                      attributes={"mlflow.llm.model": rerank.get("model") or rerank.get("strategy") or ""})
        elif stage == "grouping":
            spans.add(stage, "CHAIN", retrieve, clock, end)
        clock = end
    clock = max(clock, retrieve_end)
    top = spans.spans[0]
    top["end_time_unix_nano"] = max(top["end_time_unix_nano"], clock)
    top["attributes"].update({
        "kbench.scores": json.dumps(question_scores(records, qid)),
        "kbench.timing": json.dumps("span durations: the run's latency per question and stage "
                                    f"(retrieval.latency: {config.get('retrieval', {}).get('latency', 'per_query')}); "
                                    "questions laid out one after another from when the search began"),
        QUERY_TAG: json.dumps(qid),
        # the trace's name is the run and the question id; no other trace tag: MLflow writes each tag row on its
        # own (the trace id derives from the run folder and the question id, so nothing needs a tag to find it)
        "mlflow.traceTag.mlflow.traceName": json.dumps(trace_name(records, qid)),
    })
    return spans, clock


def query_stage_spans(records: RunRecords, rewrites: dict[str, Any], question: str, rewrite_ms: float) -> list[tuple]:
    """(name, type, milliseconds, inputs, outputs, attributes) of each query pre-stage the question went through:
    CHAT_MODEL per LLM request (the prompt sent, the answer; HyDE asks once per text searched), PARSER for synonym
    expansion. The texts each stage was given are rebuilt as kbench.retrieval.query.plan_queries composes them."""
    calls: list[tuple[str, str, str, Any]] = []  # (stage, section, text given, answer)
    text = question
    if "expansion" in rewrites:
        calls.append(("expansion", "query.expansion", text, rewrites["expansion"]))
        if isinstance(rewrites["expansion"], str) and not rewrites["expansion"].startswith("failed:"):
            text = rewrites["expansion"]
    texts = [text]
    if "decomposition" in rewrites:
        parts = [p for p in rewrites["decomposition"] if not str(p).startswith("failed:")]
        calls.append(("decomposition", "query.decomposition", text, "\n".join(map(str, rewrites["decomposition"]))))
        keep = records.config.get("query", {}).get("decomposition", {}).get("include_original", True)
        texts = list(dict.fromkeys(([text] if keep or not parts else []) + parts))
    if "hyde" in rewrites:
        calls += [("hyde", "query.hyde", given, passage) for given, passage in zip(texts, rewrites["hyde"])]
    out = []
    for n, (stage, section, given, answer) in enumerate(calls):
        settings = records.config.get("query", {}).get(stage, {})
        llm = stage != "expansion" or settings.get("strategy") == "llm"
        prompt = records.prompts.get(f"kbench-query-{stage}", {}).get("template", "")
        inputs = ({"messages": [{"role": "user", "content": _fill(prompt, query=given,
                                                                   max_parts=settings.get("max_parts", ""))}]}
                  if llm else {"query": given})
        outputs = {"choices": [{"message": {"role": "assistant", "content": answer}}]} if llm else answer
        attributes = {"kbench.stage": section, "kbench.timing": "the run's query-rewrite seconds over its questions"}
        if llm:
            attributes["mlflow.llm.model"] = settings.get("model") or ""
        same = [i for i, c in enumerate(calls) if c[0] == stage]  # HyDE on several parts: query_hyde_1, _2, ...
        name = f"query_{stage}" if len(same) == 1 else f"query_{stage}_{same.index(n) + 1}"
        out.append((name, "CHAT_MODEL" if llm else "PARSER", rewrite_ms / len(calls), inputs, outputs, attributes))
    return out


def question_scores(records: RunRecords, qid: str) -> dict[str, Any]:
    """The question's headline scores, first relevant rank and miss stage, from per_query_results.json (the root
    span's ``kbench.scores``)."""
    row = records.results.get(qid, {})
    keep = [*headline_columns(row), "first_relevant_rank", "miss_stage"]
    return {name: row[name] for name in keep if name in row and row[name] not in (None, "")}


def run_spans(records: RunRecords, start_ns: int) -> SpanBuilder:
    """The run's trace: each stage that is not per question with its seconds, and each LLM stage's tokens."""
    spans = SpanBuilder(trace_id_for(records.folder_name, RUN_TRACE))
    seconds = records.stages.get("seconds", {})
    total = int(sum(seconds.values()) * 1e9)
    root = spans.add(RUN_TRACE, "CHAIN", None, start_ns, start_ns + total,
                     inputs={"dataset": (records.dataset or {}).get("name", ""), "config": records.config.get("name")},
                     outputs={k: v for k, v in records.metrics.items() if k.startswith("count_")},
                     attributes={"mlflow.traceTag.mlflow.traceName": trace_name(records, RUN_TRACE)})
    clock = start_ns
    for stage, secs in seconds.items():
        end = clock + int(secs * 1e9)
        span_type = "EMBEDDING" if stage == "embed" else "CHAIN"
        spans.add(stage, span_type, root, clock, end, attributes={"kbench.seconds": secs})
        clock = end
    llm_stages = sorted({k[len("llm_"):-len("_requests")] for k in records.metrics
                         if k.startswith("llm_") and k.endswith("_requests") and not k.startswith("llm_total")})
    for stage in llm_stages:
        counts = {c: records.metrics.get(f"llm_{stage}_{c}", 0.0) for c in
                  ("requests", "cache_hits", "failures", "prompt_tokens", "completion_tokens", "cost_usd")}
        usage = {"input_tokens": int(counts["prompt_tokens"]), "output_tokens": int(counts["completion_tokens"]),
                 "total_tokens": int(counts["prompt_tokens"] + counts["completion_tokens"])}
        prompt = next((p for p in records.prompts.values() if p["stage"].replace(".", "_") == stage), None)
        spans.add(f"llm_{stage}", "CHAT_MODEL", root, start_ns, start_ns,
                  inputs={"prompt_template": prompt["template"]} if prompt else {"stage": stage},
                  outputs={k: v for k, v in counts.items()},
                  attributes={"mlflow.chat.tokenUsage": usage, "mlflow.llm.model": (prompt or {}).get("model", ""),
                              "kbench.tokens": "the run's totals for this stage (requests sent; cache hits cost none)"})
    return spans


def expectation_for(question: dict[str, Any], source: dict[str, Any], digest: str):
    """A question's labels as one MLflow Expectation ``expected_retrieved_context``: its reference spans (document,
    offsets, text) or relevant documents (document, grade); the source names the dataset and its digest."""
    from mlflow.entities import AssessmentSource, Expectation

    generated = source.get("generated") or {}
    kind = "HUMAN" if source.get("type") != "generated" else ("LLM_JUDGE" if generated.get("model") else "CODE")
    origin = AssessmentSource(source_type=kind, source_id=f"dataset:{source.get('name', '')}@{digest}")
    return Expectation(EXPECTED_CONTEXT, question["expected"], source=origin, metadata={QUERY_TAG: question["query_id"]})


def run_traces(client, experiment_id: str, run_id: str, include_spans: bool = False,
               filter_string: str | None = None) -> list:
    """Every trace linked to ``run_id`` (page by page)."""
    found, token = [], None
    while True:
        page = client.search_traces(locations=[experiment_id], run_id=run_id, include_spans=include_spans,
                                    filter_string=filter_string, max_results=500, page_token=token)
        found += list(page)
        token = page.token
        if not token:
            return found


def existing_traces(client, experiment_id: str, run_id: str) -> dict[str, set[str]]:
    """Trace id -> names of its assessments, for the traces already linked to ``run_id``."""
    return {t.info.trace_id: {a.name for a in t.info.assessments} for t in run_traces(client, experiment_id, run_id)}


def log_traces(client, experiment_id: str, run_id: str, run_dir: Path, *, fresh: bool = False) -> TraceReport:
    """Write the run folder's traces to ``client``'s store (an ``MlflowClient``), link them to ``run_id`` and attach
    the expectations; traces already there are kept (``fresh``: the run was created just now and has none, so the
    store is not asked)."""
    from mlflow.entities import Span
    from mlflow.tracing.client import TracingClient

    began = time.perf_counter()
    records = RunRecords.read(run_dir)
    report = TraceReport()
    traced = records.traced_ids()
    if not traced:
        return report
    report.questions = len(traced)
    questions = records.questions
    rows = {str(r["query_id"]): r for r in records.per_query.to_dict("records")}
    seconds = records.stages.get("seconds", {})
    before_search = sum(v for k, v in seconds.items() if k not in ("query_rewrite", "search", "evaluate", "context"))
    clock = int(((records.stages.get("started_ms") or time.time() * 1000) + before_search * 1000) * 1e6)
    rewrite_ms = seconds.get("query_rewrite", 0.0) * 1000 / max(len(rows), 1)
    have = {} if fresh else existing_traces(client, experiment_id, run_id)
    spans: list[dict[str, Any]] = []
    todo: list[str] = []
    previews: dict[str, str] = {}  # trace id -> its Input text in MLflow's Traces list
    for qid in traced:
        question = questions.get(qid, {}).get("question", "")
        built, clock = question_spans(records, qid, question, rows[qid], clock, rewrite_ms)
        report.trace_ids[qid] = built.trace_id
        if built.trace_id in have:
            report.existing += 1
        else:
            spans += built.spans
            todo.append(built.trace_id)
            previews[built.trace_id] = list_preview(records, qid, question)
    started_ns = int((records.stages.get("started_ms") or time.time() * 1000) * 1e6)
    run_trace = run_spans(records, started_ns)
    if run_trace.trace_id not in have:
        spans += run_trace.spans
        todo.append(run_trace.trace_id)
        previews[run_trace.trace_id] = list_preview(records, RUN_TRACE)
    tracing = TracingClient(str(client.tracking_uri))
    if spans:
        tracing.log_spans(experiment_id, [Span.from_dict(s) for s in spans])
        set_request_previews(tracing, previews)
    for start in range(0, len(todo), LINK_BATCH):
        client.link_traces_to_run(todo[start:start + LINK_BATCH], run_id)
    report.logged = len(todo) - (run_trace.trace_id in todo)
    report.run_trace = True
    if records.dataset is not None:
        source, digest = records.dataset["source"], records.dataset["digest"]
        expectations = []
        for qid, trace_id in report.trace_ids.items():
            if qid in questions and EXPECTED_CONTEXT not in have.get(trace_id, set()):
                expectation = expectation_for(questions[qid], source, digest)
                expectation.trace_id = trace_id
                expectations.append(expectation)
        report.expectations = log_assessments(tracing, expectations)
    report.seconds = time.perf_counter() - began
    return report
