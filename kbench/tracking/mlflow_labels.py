"""``kbench label`` in MLflow: human grades as assessments (source HUMAN) on the traces of the runs they concern,
the labels file as an artifact, and the model's agreement with the humans (Cohen's kappa) as a metric.

Reads only files (the labels file ``LABELS``, ``LABELS.provenance.jsonl`` and ``LABELS.pool.json``, written by
kbench/labelling): each pair's grade becomes a Feedback ``kbench_human_relevance`` on the trace of its question
in each pooled run that ranked that passage, on the ``retrieve`` span when the trace shows it (else on the trace),
with the annotator as a HUMAN source, the grade's meaning as rationale and the passage's document and offsets in
metadata (as ``kbench judge``'s Feedback: the two sit side by side in MLflow's trace view). A grade already there
(same passage, same annotator, same grade) is not written again. The three files go to each run as artifacts under
``labels/``; ``label_human_grades`` and, when given, ``label_model_kappa`` as metrics.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from kbench.tracking import tags as tag
from kbench.tracking.mlflow_bulk import log_assessments
from kbench.tracking.mlflow_feedback import _key, _retrieve_span
from kbench.tracking.mlflow_run import logged_value
from kbench.tracking.mlflow_traces import run_traces, trace_id_for
from kbench.tracking.read import read_run, tracking_client

FEEDBACK = "kbench_human_relevance"
ARTIFACTS = "labels"


@dataclass
class HumanLabelReport:
    on_spans: int = 0
    on_traces: int = 0
    existing: int = 0
    runs: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def written(self) -> int:
        return self.on_spans + self.on_traces

    def summary(self) -> str:
        return "; ".join([f"MLflow: {self.written} human grades as '{FEEDBACK}' assessments (source HUMAN) on the "
                          f"traces of {len(self.runs)} runs ({self.on_spans} on the ranking's documents, "
                          f"{self.on_traces} on the trace); {self.existing} were there already; the labels file and "
                          f"its provenance logged under {ARTIFACTS}/ on each run", *self.notes])


def latest_grades(labels: Path) -> dict[tuple[str, str], dict]:
    """(query id, passage id) -> the provenance event of its grade (annotator, time), for every qrels line, its ids
    as written (a labels file kbench writes percent-encodes the unsafe characters of an id: read it with
    ``kbench.labelling.LabelsFile.graded_events`` to have them decoded)."""
    labels = Path(labels)
    side = labels.with_name(labels.name + ".provenance.jsonl")
    events = {}
    for line in side.read_text(encoding="utf-8").splitlines()[1:]:
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(event, dict) and event.get("grade") != "skip":
            events[(str(event.get("query_id")), str(event.get("pair")))] = event
    out = {}
    for line in labels.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if len(parts) == 4:
            key = (parts[0], parts[2])
            out[key] = {**events.get(key, {"annotator": "unknown"}), "grade": int(parts[3])}
    return out


def _passage(pair_id: str) -> tuple[str, int, int]:
    doc, _, span = pair_id.rpartition("@")
    start, _, end = span.partition("-")
    return doc, int(start), int(end)


def human_feedback(key: tuple[str, str], event: dict, meanings: dict[int, str], trace_id: str, span_id: str | None,
                   chunk_id: str | None):
    from mlflow.entities import AssessmentSource, Feedback

    doc, start, end = _passage(key[1])
    grade = int(event["grade"])
    metadata = {"doc_uri": doc, "start": str(start), "end": str(end), "query_id": key[0],
                "labelled_at": str(event.get("at", "")), "via": str(event.get("source", "page"))}
    if chunk_id:
        metadata["chunk_id"] = chunk_id
    return Feedback(FEEDBACK, grade, source=AssessmentSource(source_type="HUMAN",
                                                             source_id=str(event.get("annotator") or "unknown")),
                    rationale=f"grade {grade}: the passage {meanings.get(grade, '')}".strip(), trace_id=trace_id,
                    span_id=span_id, metadata=metadata)


def log_human_labels(labels: str | Path, tracking_uri: str | None = None, *, kappa: float | None = None,
                     run_ids: list[str] | None = None, grades: dict[tuple[str, str], dict] | None = None
                     ) -> HumanLabelReport:
    """Log a labels file to the runs of its pool (or ``run_ids``); see the module's docstring. ``grades``: (query
    id, passage id) -> its provenance event with the grade, as the labels file reads back
    (``kbench.labelling.LabelsFile.graded_events``: ids decoded); by default ``latest_grades`` of the file."""
    from mlflow.tracing.client import TracingClient

    labels = Path(labels)
    pool = json.loads(labels.with_name(labels.name + ".pool.json").read_text(encoding="utf-8"))
    meanings = {0: "nothing to do with the query", 1: "related to the query but does not answer it",
                2: "answers the query partly", 3: "holds the query's exact answer"}
    if pool.get("scale") == "binary":
        meanings = {0: "does not help answer the question", 1: "helps answer the question"}
    grades = latest_grades(labels) if grades is None else grades
    by_question: dict[str, list[tuple[tuple[str, str], dict]]] = {}
    for key, event in grades.items():
        by_question.setdefault(key[0], []).append((key, event))
    client = tracking_client(tracking_uri)
    tracing = TracingClient(str(client.tracking_uri))
    report = HumanLabelReport()
    feedback = []
    for run_id in run_ids or list(pool.get("runs", {}).values()):
        run = client.get_run(run_id)
        report.runs.append(run_id)
        for path in (labels, labels.with_name(labels.name + ".provenance.jsonl"),
                     labels.with_name(labels.name + ".pool.json")):
            client.log_artifact(run_id, str(path), ARTIFACTS)
        client.log_metric(run_id, "label_human_grades", len(grades))
        if kappa is not None and kappa == kappa:
            client.log_metric(run_id, "label_model_kappa", logged_value(kappa))
        folder = run.data.tags.get(tag.RUN_FOLDER)
        if not folder:
            report.notes.append(f"run {run_id} has no traces (logged before kbench exported them): its grades are in "
                                "the artifact only; `kbench runs export-mlflow` adds the traces")
            continue
        traces = {t.info.trace_id: t for t in run_traces(client, run.info.experiment_id, run_id, include_spans=True)}
        rankings = read_run(client, run)
        for qid, items in by_question.items():
            trace = traces.get(trace_id_for(folder, qid))
            if trace is None or qid not in rankings.hits:
                continue
            have = {(_key(a.metadata), a.source.source_id, getattr(a, "value", None)) for a in trace.info.assessments
                    if a.name == FEEDBACK}
            span = _retrieve_span(trace)
            shown = {_key(d["metadata"]) for d in (span.outputs or [])} if span is not None else set()
            ranked = {_key({"doc_uri": h.doc_id, "start": h.start, "end": h.end}): h.chunk_id for h in rankings[qid]}
            for key, event in items:
                doc, start, end = _passage(key[1])
                where = _key({"doc_uri": doc, "start": start, "end": end})
                if where not in ranked:
                    continue
                if (where, str(event.get("annotator") or "unknown"), event["grade"]) in have:
                    report.existing += 1
                    continue
                on_span = where in shown
                feedback.append(human_feedback(key, event, meanings, trace.info.trace_id,
                                               span.span_id if on_span else None, ranked[where]))
                report.on_spans += on_span
                report.on_traces += not on_span
    log_assessments(tracing, feedback)
    return report


__all__ = ["FEEDBACK", "HumanLabelReport", "latest_grades", "log_human_labels"]
