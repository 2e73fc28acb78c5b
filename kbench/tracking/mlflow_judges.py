"""MLflow's own retrieval judges on a kbench run: ``mlflow.genai.evaluate`` over the run's question traces.

MLflow's ``RetrievalRelevance`` grades each document of a trace's top-level RETRIEVER span (kbench's ``retrieve``:
the run's ranking) against the question; ``RetrievalSufficiency`` asks whether those documents hold the expected
facts, which kbench gives from the reference spans' texts (span datasets only: BEIR qrels name documents, not
facts). ``RetrievalGroundedness`` grades a generated answer against the context; a kbench run retrieves and
generates no answer, so it is not offered.

The judge is any OpenAI-compatible chat endpoint, ``kbench serve`` included, through MLflow's ``openai`` provider:
model URI ``openai:/<model>``, the endpoint in ``OPENAI_BASE_URL`` (kbench sets it for the call from
``--base-url``) and a key in ``OPENAI_API_KEY`` (MLflow requires one; ``kbench serve`` checks none, so kbench passes
a placeholder when the variable named by ``--api-key-env`` is unset and the endpoint is on this machine). No
litellm, and no network beyond that endpoint: MLflow's model catalog download is turned off for the call
(``MLFLOW_MODEL_CATALOG_URI`` empty).

The same discipline as every other LLM path (kbench.llm): the endpoint and the key are checked before any work
(``LLMClient.check_endpoint``: one line, exit 2, within seconds), each request waits at most ``timeout_s``
(MLflow's ``MLFLOW_GATEWAY_ROUTE_TIMEOUT_SECONDS`` for the call), and the answers are held to the usable-answer
floor (``llm.policy.min_usable``): below it the command stops with exit 2 and nothing is logged into the run.

kbench runs MLflow's scorers itself (``Scorer.run`` per trace, on daemon threads) rather than through
``mlflow.genai.evaluate``, which opens the judged run (FINISHED -> RUNNING, and KILLED when interrupted) and
logs each Feedback as it comes. Here nothing is written until every answer is in and the floor is met; then the
Feedback go onto the traces and MLflow's aggregate metrics (``retrieval_relevance/precision/mean``, ...) into
the run with ``MlflowClient.log_batch``, which never changes a run's status. Ctrl-C stops it at once (the
threads are daemons) with nothing logged.
"""
from __future__ import annotations

import math
import os
import queue
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import urlparse

from kbench.datasets.mlflow_questions import fluent_tracking_uri
from kbench.tracking import tags as tag
from kbench.tracking.mlflow_traces import EXPECTED_CONTEXT, is_run_trace, run_traces
from kbench.tracking.read import find_run, tracking_client
from kbench.errors import UserError
from kbench.llm import Endpoint, LLMClient, LLMPolicy
from kbench.llm.progress import AnswerProgress
from kbench.llm.usable import UsableCount, check_usable, most_bad_allowed

SCORERS = ("relevance", "sufficiency")


class JudgeSetupError(UserError, ValueError):
    """The run or the judge cannot be used (no traces, no endpoint, no key, a scorer that does not apply)."""


@dataclass
class MlflowJudgeResult:
    run_id: str
    traces: int
    metrics: dict[str, float] = field(default_factory=dict)
    feedback: int = 0  # assessments the judges logged
    errors: int = 0  # of those, the judge's answer could not be used (error instead of a value)
    notes: list[str] = field(default_factory=list)
    partial: bool = False  # --allow-partial and below the floor: logged, and the run tagged kbench.llm.partial


@contextmanager
def _environment(values: dict[str, str]):
    """``values`` in os.environ for the block (MLflow's openai provider reads its endpoint and key there)."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def judge_environment(base_url: str | None, api_key_env: str, concurrency: int,
                      timeout_s: float = 60.0) -> dict[str, str]:
    """The variables MLflow's openai provider and evaluation harness read, for this judge."""
    # MLflow looks the judge model up in a catalog it downloads from github.com: off (nothing but the endpoint);
    # its requests wait at most timeout_s each (MLflow's own default is 300 s)
    env = {"MLFLOW_GENAI_EVAL_MAX_WORKERS": str(concurrency), "MLFLOW_MODEL_CATALOG_URI": "",
           "MLFLOW_GATEWAY_ROUTE_TIMEOUT_SECONDS": str(max(1, math.ceil(timeout_s)))}
    url = base_url or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE")
    if not url:
        raise JudgeSetupError("no judge endpoint: give --base-url (an OpenAI-compatible /v1 URL, e.g. the one "
                              "`kbench serve` prints) or set OPENAI_BASE_URL")
    env["OPENAI_BASE_URL"] = env["OPENAI_API_BASE"] = url.rstrip("/")
    key = os.environ.get(api_key_env)
    if not key:
        host = urlparse(url).hostname or ""
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise JudgeSetupError(f"${api_key_env} is not set; the judge at {url} needs a key (or --api-key-env "
                                  "naming the variable that holds it)")
        key = "kbench-local"  # a local endpoint (kbench serve) checks none; MLflow insists on one
    env["OPENAI_API_KEY"] = key
    return env


def judged_frame(traces: list, scorers: list[str]):
    """One row per question trace: the trace and, for sufficiency, the reference texts as expected facts."""
    import pandas as pd

    rows = []
    for trace in traces:
        row = {"trace": trace}
        if "sufficiency" in scorers:
            expected = next((a.value for a in trace.info.assessments if a.name == EXPECTED_CONTEXT), [])
            row["expectations"] = {"expected_facts": [e["content"] for e in expected if e.get("content")]}
        rows.append(row)
    return pd.DataFrame(rows)


def check_judge_endpoint(env: dict[str, str], model: str, policy: LLMPolicy) -> None:
    """The endpoint answers and takes the key, before any trace is read or judged (LLMClient.check_endpoint)."""
    with _environment({"KBENCH_MLFLOW_JUDGE_KEY": env["OPENAI_API_KEY"]}):
        endpoint = Endpoint("mlflow-judge", env["OPENAI_BASE_URL"], model, "KBENCH_MLFLOW_JUDGE_KEY",
                            base_url_option="--base-url")
        with LLMClient(endpoint, stage="mlflow_judge", policy=policy) as client:
            client.check_endpoint()


@dataclass
class _Task:
    trace: object
    scorer: object
    expected: int  # answers this (trace, scorer) asks for: a relevance grade per document, one sufficiency verdict
    feedbacks: list = field(default_factory=list)
    usable: int = 0
    failed: int = 0


def _score(task: _Task, expectations) -> None:
    from mlflow.genai.evaluation.utils import standardize_scorer_value

    name = task.scorer.name
    try:
        value = task.scorer.run(trace=task.trace, expectations=expectations)
        task.feedbacks = standardize_scorer_value(name, value)
    except Exception as e:  # noqa: BLE001 (MLflow's harness does the same: the error becomes the Feedback)
        from mlflow.entities import AssessmentError, Feedback
        from mlflow.entities.assessment_source import AssessmentSource

        task.feedbacks = [Feedback(name=name, source=AssessmentSource("CODE", name),
                                   error=AssessmentError(error_code="SCORER_ERROR", error_message=str(e)[:500]))]
        # an answer MLflow could not read is an unusable answer; anything else (no answer in time, a refusal) failed
        task.failed = 0 if "parse" in str(e).lower() else task.expected
        return
    answers = [f for f in task.feedbacks if f.name == name]  # not the per-trace aggregate (.../precision)
    task.usable = sum(f.error is None and str(f.value).lower() in ("yes", "no") for f in answers)
    task.failed = 0


def _expected_answers(trace, scorer_name: str) -> int:
    if scorer_name != "relevance":
        return 1
    from mlflow.genai.utils.trace_utils import extract_retrieval_context_from_trace

    return max(1, sum(len(chunks) for chunks in extract_retrieval_context_from_trace(trace).values()))


def score_traces(tasks: list[_Task], expectations: dict[str, dict], *, concurrency: int, policy: LLMPolicy,
                 label: str) -> tuple[list[_Task], bool]:
    """Run every task on ``concurrency`` daemon threads; (the tasks done, whether it stopped early because the
    floor could no longer be met). The main thread waits in short steps, so Ctrl-C stops it at once."""
    total = sum(t.expected for t in tasks)
    bad_allowed = total if policy.allow_partial else most_bad_allowed(total, policy.min_usable)
    todo: queue.Queue = queue.Queue()
    for task in tasks:
        todo.put(task)
    finished: queue.Queue = queue.Queue()
    halt = threading.Event()

    def work() -> None:
        while not halt.is_set():
            try:
                task = todo.get_nowait()
            except queue.Empty:
                return
            try:
                _score(task, expectations.get(task.trace.info.trace_id))
            except Exception:  # noqa: BLE001 (never leave the main thread waiting for a task that died)
                task.feedbacks, task.usable, task.failed = [], 0, task.expected
            finally:
                finished.put(task)

    shown = AnswerProgress(label, total)
    shown.start(f", {concurrency} at a time")
    for _ in range(min(concurrency, len(tasks))):
        threading.Thread(target=work, daemon=True, name="kbench-mlflow-judge").start()
    done: list[_Task] = []
    bad = 0
    try:
        while len(done) < len(tasks):
            try:
                task = finished.get(timeout=0.2)
            except queue.Empty:
                continue
            done.append(task)
            unusable = task.expected - task.usable - task.failed
            shown.add(usable=True, n=task.usable)
            shown.add(usable=False, n=max(0, unusable))
            shown.add(failed=True, n=task.failed)
            bad += task.expected - task.usable
            if bad > bad_allowed:
                break
    finally:
        halt.set()
        shown.close("" if len(done) == len(tasks) else "; stopped")
    return done, len(done) < len(tasks)


def run_mlflow_judges(run_id: str, *, model: str, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                      scorers: list[str] | None = None, max_traces: int | None = None, concurrency: int = 4,
                      max_tokens: int | None = None, timeout_s: float | None = None,
                      tracking_uri: str | None = None, policy: LLMPolicy | None = None) -> MlflowJudgeResult:
    """Run MLflow's retrieval scorers over the question traces of ``run_id`` (the first ``max_traces`` of them)
    with ``model`` at ``base_url`` as the judge; results logged into the run once the usable-answer floor of
    ``policy`` is met (else ``UnusableAnswersError``, nothing logged). ``max_tokens`` caps each relevance answer
    (MLflow passes no inference params to sufficiency); ``timeout_s``: seconds one request may take (default
    ``policy.timeout_s``, 60)."""
    import mlflow
    from mlflow.entities import Metric
    from mlflow.genai.scorers import RetrievalRelevance, RetrievalSufficiency
    from mlflow.genai.scorers.aggregation import compute_aggregated_metrics
    from mlflow.utils.time import get_current_time_millis

    policy = policy or LLMPolicy()
    timeout_s = timeout_s or policy.timeout_s
    scorers = list(scorers or SCORERS)
    unknown = sorted(set(scorers) - set(SCORERS))
    if unknown:
        raise JudgeSetupError(f"unknown scorer(s) {', '.join(unknown)}; kbench runs take: {', '.join(SCORERS)} "
                              "(groundedness grades a generated answer, which a retrieval run has not)")
    env = judge_environment(base_url, api_key_env, concurrency, timeout_s)
    check_judge_endpoint(env, model, policy)  # before any work: a dead port or a refused key is one line
    client = tracking_client(tracking_uri)
    run = find_run(client, run_id)
    run_id, experiment_id = run.info.run_id, run.info.experiment_id
    if not run.data.tags.get(tag.RUN_FOLDER):
        raise JudgeSetupError(f"run {run_id} has no traces (logged before kbench exported them); export its folder "
                              "with `kbench runs export-mlflow FOLDER`, then run this again")
    traces = [t for t in run_traces(client, experiment_id, run_id, include_spans=True)
              if not is_run_trace(t.info.tags.get("mlflow.traceName"))]
    traces.sort(key=lambda t: t.info.request_time)
    if max_traces is not None:
        traces = traces[:max_traces]
    if not traces:
        raise JudgeSetupError(f"run {run_id} has no question traces (tracking.traces.enabled was false?); export "
                              "them with `kbench runs export-mlflow FOLDER`")
    result = MlflowJudgeResult(run_id, len(traces))
    if "sufficiency" in scorers and not any(
            e.get("content") for t in traces for a in t.info.assessments if a.name == EXPECTED_CONTEXT
            for e in a.value):
        scorers.remove("sufficiency")
        result.notes.append("sufficiency left out: the dataset's labels are documents, not reference texts")
    if not scorers:
        raise JudgeSetupError("no scorer applies to this run; give --scorers relevance")
    judge = f"openai:/{model}"
    params = {"max_tokens": max_tokens, "temperature": 0.0} if max_tokens else None
    expected = {name: {t.info.trace_id: _expected_answers(t, name) for t in traces} for name in scorers}
    # one scorer call on one trace asks a request per document: it may take that many request timeouts
    per_call = {name: timeout_s * (max(expected[name].values()) + 1) for name in scorers}
    chosen = {name: RetrievalRelevance(model=judge, inference_params=params, timeout=per_call[name])
              if name == "relevance" else RetrievalSufficiency(model=judge, timeout=per_call[name])
              for name in scorers}
    frame = judged_frame(traces, scorers)
    expectations = {t.info.trace_id: row.get("expectations") for t, row in zip(traces, frame.to_dict("records"))}
    tasks = [_Task(t, chosen[name], expected[name][t.info.trace_id]) for t in traces for name in scorers]
    with _environment(env):
        done, stopped = score_traces(tasks, expectations, concurrency=concurrency, policy=policy,
                                     label=f"mlflow-judge ({model})")
    total = sum(t.expected for t in tasks)
    usable, failed = sum(t.usable for t in done), sum(t.failed for t in done)
    asked = sum(t.expected for t in done) if stopped else None
    partial = check_usable(UsableCount("mlflow-judge", model, total, usable, failed, stage="mlflow_judge", asked=asked),
                           policy, fix="use a judge model that answers in MLflow's JSON format ({\"result\": "
                           "\"yes\"|\"no\", ...}), or check --base-url, --model and --timeout-s")
    # the floor is met (or --allow-partial): now, and only now, write into the judged run
    from mlflow.tracing.constant import AssessmentMetadataKey

    feedbacks = []
    with fluent_tracking_uri(str(client.tracking_uri)):
        for task in done:
            root = task.trace.data._get_root_span()
            for feedback in task.feedbacks:
                feedback.trace_id = task.trace.info.trace_id
                feedback.metadata = {**(feedback.metadata or {}), AssessmentMetadataKey.SOURCE_RUN_ID: run_id}
                if feedback.span_id is None and root is not None:
                    feedback.span_id = root.span_id
                mlflow.log_assessment(trace_id=feedback.trace_id, assessment=feedback)
                feedbacks.append(feedback)
    metrics = compute_aggregated_metrics([_Assessed(feedbacks)], scorers=list(chosen.values()))
    result.metrics = {k: float(v) for k, v in metrics.items()}
    now = get_current_time_millis()
    client.log_batch(run_id, metrics=[Metric(k, v, now, 0) for k, v in result.metrics.items()],
                     tags=[] if not partial else [_partial_tag(run, "mlflow_judge")])
    names = {scorer.name for scorer in chosen.values()}
    result.feedback = sum(1 for f in feedbacks if f.name.split("/")[0] in names)
    result.errors = sum(1 for f in feedbacks if f.name.split("/")[0] in names and f.error is not None)
    result.partial = partial
    return result


@dataclass
class _Assessed:  # what MLflow's compute_aggregated_metrics reads of an evaluation result
    assessments: list


def _partial_tag(run, stage: str):
    from mlflow.entities import RunTag

    stages = {s.strip() for s in run.data.tags.get(tag.LLM_PARTIAL, "").split(",") if s.strip()}
    return RunTag(tag.LLM_PARTIAL, ", ".join(sorted(stages | {stage})))
