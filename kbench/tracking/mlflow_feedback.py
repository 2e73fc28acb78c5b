"""``kbench judge`` grades as MLflow Feedback on the judged runs' traces.

``kbench judge --out QRELS`` writes ``QRELS.json``: the judge model, the prompt's SHA-256, the runs pooled and
every chunk-level judgement (question, document, offsets, grade 0-3, or none when the answer had no grade). Here
each judgement becomes a Feedback ``kbench_judge_relevance`` on the trace of its question in each run whose
trace shows that chunk: on the trace's ``retrieve`` span (the ranking), with the grade as value, its meaning as
rationale, the judge model as an LLM_JUDGE source and the prompt hash, document, offsets and chunk in metadata. A
judgement whose chunk the trace does not show (ranked below ``tracking.traces.max_documents``) goes on the trace
itself; an answer without a grade becomes a Feedback with an error. The judge's prompt is registered in the
Prompt Registry and linked to the runs. A judgement goes only to runs that ranked its chunk (the pool mixes
runs); feedback already on a trace (same chunk, same judge) is not written again.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from kbench.errors import UserError
from kbench.hashing import sha256_text
from kbench.tracking import tags as tag
from kbench.tracking.mlflow_bulk import log_assessments
from kbench.tracking.mlflow_pages import register_prompts
from kbench.tracking.mlflow_traces import run_traces, trace_id_for
from kbench.tracking.read import read_run, tracking_client

class JudgementsFileError(UserError, ValueError):
    """The judgements file is not what `kbench judge` writes (not JSON, not an object, no judgements list)."""


JUDGEMENTS_HINT = "give the <out>.json that `kbench judge --out <out>` wrote"


def read_judgements(path: str | Path) -> dict:
    """``kbench judge``'s ``<out>.json``; one-line JudgementsFileError otherwise (never a line of the file)."""
    path = Path(path)
    if not path.is_file():
        raise JudgementsFileError(f"--judgements: {path} is not a file; {JUDGEMENTS_HINT}")
    try:
        provenance = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise JudgementsFileError(f"--judgements: {path} is not UTF-8 text (a binary file?); {JUDGEMENTS_HINT}") \
            from None
    except json.JSONDecodeError as e:
        raise JudgementsFileError(f"--judgements: {path}:{e.lineno}: not JSON ({e.msg}); {JUDGEMENTS_HINT}") from None
    except RecursionError:
        raise JudgementsFileError(f"--judgements: {path}: JSON nested too deeply; {JUDGEMENTS_HINT}") from None
    wanted = {"query_id", "doc_id", "start", "end"}
    if not isinstance(provenance, dict) or not isinstance(provenance.get("judgements"), list) or not all(
            isinstance(j, dict) and wanted <= j.keys() for j in provenance["judgements"]):
        raise JudgementsFileError(f"--judgements: {path} holds no list of judgements (query_id, doc_id, start, end, "
                                  f"grade); {JUDGEMENTS_HINT}")
    return provenance


FEEDBACK = "kbench_judge_relevance"
JUDGE_PROMPT = "kbench-judge-relevance"


@dataclass
class FeedbackReport:
    on_spans: int = 0  # feedback on the ranking span's document
    on_traces: int = 0  # the chunk is not among the documents the trace shows
    unparsed: int = 0  # feedback carrying an error (the judge's answer had no grade)
    existing: int = 0  # already there
    untraced: dict[str, int] = field(default_factory=dict)  # run id -> judgements of questions it has no trace for
    notes: list[str] = field(default_factory=list)

    @property
    def written(self) -> int:
        return self.on_spans + self.on_traces

    def summary(self) -> str:
        """One line for the command that wrote it."""
        line = (f"MLflow: {self.written} judgements as Feedback '{FEEDBACK}' on the runs' traces ({self.on_spans} on "
                f"the ranking's documents, {self.on_traces} ranked below what the traces show, {self.unparsed} without "
                f"a grade); {self.existing} were there already")
        missing = sum(self.untraced.values())
        if missing:
            line += f"; {missing} judgements of questions the runs did not trace (tracking.traces.max_queries)"
        return "; ".join([line, *self.notes])


def _retrieve_span(trace):
    return next((s for s in trace.data.spans if s.name == "retrieve" and s.span_type == "RETRIEVER"), None)


def _key(metadata: dict) -> tuple:
    return tuple(str((metadata or {}).get(k)) for k in ("doc_uri", "start", "end"))


def judge_feedback(judgement: dict, provenance: dict, meanings: dict[int, str], trace_id: str, span_id: str | None,
                   chunk_id: str | None):
    """One judgement as an MLflow Feedback on ``trace_id`` (its ranking span when the chunk is shown there)."""
    from mlflow.entities import AssessmentError, AssessmentSource, Feedback

    grade = judgement.get("grade")
    metadata = {"doc_uri": str(judgement["doc_id"]), "start": str(judgement["start"]), "end": str(judgement["end"]),
                "prompt_sha256": str(provenance.get("prompt_sha256", "")), "query_id": str(judgement["query_id"])}
    if chunk_id:
        metadata["chunk_id"] = chunk_id
    source = AssessmentSource(source_type="LLM_JUDGE", source_id=str(provenance.get("judge_model") or "judge"))
    if grade is None:
        return Feedback(FEEDBACK, error=AssessmentError("UNPARSED", "the judge's answer held no grade 0-3"),
                        source=source, trace_id=trace_id, span_id=span_id, metadata=metadata)
    rationale = f"grade {grade}: the passage {meanings.get(int(grade), '')}".strip()
    return Feedback(FEEDBACK, int(grade), source=source, rationale=rationale, trace_id=trace_id, span_id=span_id,
                    metadata=metadata)


def log_judge_feedback(judgements_file: str | Path, tracking_uri: str | None = None, *,
                       meanings: dict[int, str] | None = None, prompt_template: str | None = None,
                       run_ids: list[str] | None = None) -> FeedbackReport:
    """Attach the judgements of ``judgements_file`` (``kbench judge``'s ``<out>.json``) to the traces of its runs
    (or of ``run_ids``: e.g. the same folders exported to another store). ``meanings``: grade -> what it means
    (the rationale); ``prompt_template``: the judge's prompt, registered and linked to the runs."""
    from mlflow.tracing.client import TracingClient

    provenance = read_judgements(judgements_file)
    client = tracking_client(tracking_uri)
    tracing = TracingClient(str(client.tracking_uri))
    report = FeedbackReport()
    by_question: dict[str, list[dict]] = {}
    for judgement in provenance.get("judgements", []):
        by_question.setdefault(str(judgement["query_id"]), []).append(judgement)
    source_id = str(provenance.get("judge_model") or "judge")
    prompts = {}
    if prompt_template:
        prompts = {JUDGE_PROMPT: {"template": prompt_template, "stage": "judge", "model": source_id,
                                  "sha256": sha256_text(prompt_template)}}
    feedback = []
    for run_id in run_ids or provenance.get("runs", []):
        run = client.get_run(run_id)
        folder = run.data.tags.get(tag.RUN_FOLDER)
        if not folder:
            report.notes.append(f"run {run_id} has no traces (logged before kbench exported them); export its folder "
                                "with `kbench runs export-mlflow`, then run this again")
            continue
        traces = {t.info.trace_id: t for t in run_traces(client, run.info.experiment_id, run_id, include_spans=True)}
        rankings = read_run(client, run)  # which chunks this run ranked (its rankings.parquet)
        for qid, judgements in by_question.items():
            trace = traces.get(trace_id_for(folder, qid))
            if trace is None:
                report.untraced[run_id] = report.untraced.get(run_id, 0) + len(judgements)
                continue
            have = {_key(a.metadata) for a in trace.info.assessments
                    if a.name == FEEDBACK and a.source.source_id == source_id}
            span = _retrieve_span(trace)
            shown = {_key(d["metadata"]): d for d in (span.outputs or [])} if span is not None else {}
            ranked = {_key({"doc_uri": h.doc_id, "start": h.start, "end": h.end}): h.chunk_id for h in rankings[qid]}
            for judgement in judgements:
                key = _key({"doc_uri": judgement["doc_id"], "start": judgement["start"], "end": judgement["end"]})
                if key not in ranked:  # pooled from another run: not this run's to carry
                    continue
                if key in have:
                    report.existing += 1
                    continue
                document = shown.get(key)
                feedback.append(judge_feedback(judgement, provenance, meanings or {}, trace.info.trace_id,
                                               span.span_id if document is not None else None, ranked[key]))
                report.unparsed += judgement.get("grade") is None
                if document is not None:
                    report.on_spans += 1
                else:
                    report.on_traces += 1
        if prompts:
            register_prompts(client, run_id, prompts)
    log_assessments(tracing, feedback)
    return report
