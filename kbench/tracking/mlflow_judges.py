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

The results go into the kbench run itself, beside its own metrics: MLflow's aggregate metrics
(``retrieval_relevance/precision/mean``, ...) and one Feedback per judged document or trace on the traces. The run's
status and end time are put back as they were (evaluating makes MLflow reopen the run).
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import urlparse

from kbench.datasets.mlflow_questions import fluent_tracking_uri
from kbench.tracking import tags as tag
from kbench.tracking.mlflow_traces import EXPECTED_CONTEXT, is_run_trace, run_traces
from kbench.tracking.read import find_run, tracking_client
from kbench.errors import UserError

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


def judge_environment(base_url: str | None, api_key_env: str, concurrency: int) -> dict[str, str]:
    """The variables MLflow's openai provider and evaluation harness read, for this judge."""
    # MLflow looks the judge model up in a catalog it downloads from github.com: off (nothing but the endpoint)
    env = {"MLFLOW_GENAI_EVAL_MAX_WORKERS": str(concurrency), "MLFLOW_MODEL_CATALOG_URI": ""}
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


def run_mlflow_judges(run_id: str, *, model: str, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                      scorers: list[str] | None = None, max_traces: int | None = None, concurrency: int = 4,
                      max_tokens: int | None = None, timeout_s: float | None = None,
                      tracking_uri: str | None = None) -> MlflowJudgeResult:
    """Run MLflow's retrieval scorers over the question traces of ``run_id`` (the first ``max_traces`` of them)
    with ``model`` at ``base_url`` as the judge; results logged into the run. ``max_tokens`` caps each relevance
    answer (MLflow passes no inference params to sufficiency); ``timeout_s``: seconds one scorer may take on one
    trace (MLflow's default 300; every document of a trace's ranking is one relevance request)."""
    import mlflow
    from mlflow.genai.scorers import RetrievalRelevance, RetrievalSufficiency

    scorers = list(scorers or SCORERS)
    unknown = sorted(set(scorers) - set(SCORERS))
    if unknown:
        raise JudgeSetupError(f"unknown scorer(s) {', '.join(unknown)}; kbench runs take: {', '.join(SCORERS)} "
                              "(groundedness grades a generated answer, which a retrieval run has not)")
    env = judge_environment(base_url, api_key_env, concurrency)
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
    options = {"timeout": timeout_s} if timeout_s else {}
    params = {"max_tokens": max_tokens, "temperature": 0.0} if max_tokens else None
    chosen = [RetrievalRelevance(model=judge, inference_params=params, **options) if name == "relevance"
              else RetrievalSufficiency(model=judge, **options) for name in scorers]
    status, end_time = run.info.status, run.info.end_time
    with _environment(env), fluent_tracking_uri(str(client.tracking_uri)):
        try:
            with mlflow.start_run(run_id=run_id):
                evaluated = mlflow.genai.evaluate(data=judged_frame(traces, scorers), scorers=chosen)
        finally:  # evaluating reopened the run: its status and end time are the run's own again
            client.set_terminated(run_id, status, end_time=end_time)
    result.metrics = {k: float(v) for k, v in (evaluated.metrics or {}).items()}
    names = {scorer.name for scorer in chosen}
    before = {a.assessment_id for t in traces for a in t.info.assessments}  # an earlier evaluation's stay counted out
    for trace in run_traces(client, experiment_id, run_id, include_spans=False):
        for assessment in trace.info.assessments:
            if assessment.name.split("/")[0] in names and assessment.assessment_id not in before:
                result.feedback += 1
                result.errors += getattr(assessment, "error", None) is not None
    return result
