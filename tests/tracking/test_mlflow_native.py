"""MLflow's own views on a kbench run, read back through MLflow's client: the question set as the run's dataset
input, one trace per question whose RETRIEVER spans hold the run's ranking and each stage's list, the labels as
expectations, the per-question evaluation table, judge grades as feedback, the headline view and description, a
sweep winner's LoggedModel, questions published to and read back from an MLflow evaluation dataset, and the
export of a run folder to a fresh store. Real runs on the demo set (vector + BM25, RRF) into real SQLite stores."""
from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml
from mlflow.tracking import MlflowClient

from kbench.cli import main
from kbench.config import load_experiment
from kbench.evaluation.relevance import chunk_matches_span
from kbench.hashing import stable_hash
from kbench.judging.judge import write_qrels
from kbench.judging.prompt import GRADES, PROMPT, PROMPT_SHA256
from kbench.runner import run_experiment
from kbench.sweep import expand_sweep, make_executor, run_sweep
from kbench.tracking import tags as tag
from kbench.tracking.mlflow_export import export_run_folder
from kbench.tracking.mlflow_feedback import FEEDBACK, log_judge_feedback
from kbench.tracking.mlflow_pages import MODEL_TYPE, NOTE_HASH_TAG, VIEW_KEY, VIEW_TAG, linked_prompts
from kbench.tracking.mlflow_traces import EXPECTED_CONTEXT, RUN_TRACE, run_traces, trace_id_for
from kbench.tracking.run_page import RESULTS_TABLE
from kbench.tracking.run_records import read_dataset_record, traced_query_ids
from tests.conftest import link_shared_cache, make_config

QUESTIONS, SHOWN = 12, 5


@pytest.fixture(scope="module")
def logged(tmp_path_factory, shared_cache_workspace):
    workspace = link_shared_cache(tmp_path_factory.mktemp("native-ws"), shared_cache_workspace)
    experiment = load_experiment(make_config(
        workspace, name="native", dataset={"name": "demo", "max_queries": QUESTIONS},
        retrieval={"legs": ["vector", "bm25"], "fusion": {"strategy": "rrf", "k": 60}, "top_k": 10},
        tracking={"experiment": "native", "traces": {"max_documents": SHOWN}}))
    result = run_experiment(experiment, progress=False)
    client = MlflowClient(result.tracking_uri)
    traces = {t.info.trace_id: t for t in run_traces(client, client.get_run(result.run_id).info.experiment_id,
                                                    result.run_id, include_spans=True)}
    return result, client, traces


def question_trace(result, traces, qid):
    return traces[trace_id_for(result.run_dir.name, qid)]


def span(trace, name):
    return next(s for s in trace.data.spans if s.name == name)


def test_the_question_set_is_the_runs_dataset_input_with_its_digest(logged):
    result, client, _ = logged
    inputs = client.get_run(result.run_id).inputs.dataset_inputs
    assert len(inputs) == 1
    dataset = inputs[0].dataset
    query_ids = [q.query_id for q in result.dataset.queries]
    fingerprint = json.loads((result.run_dir / "fingerprint.json").read_text())
    assert dataset.name == f"demo[max_queries={QUESTIONS}, seed=0]"
    assert dataset.digest == stable_hash({"content": fingerprint["dataset_hash"], "questions": query_ids})
    assert json.loads(dataset.source)["name"] == "demo" and dataset.source_type == "local"
    assert json.loads(dataset.profile)["num_rows"] == QUESTIONS
    assert {t.key: t.value for t in inputs[0].tags} == {"mlflow.data.context": "evaluation"}


def test_one_trace_per_question_whose_retriever_spans_hold_the_ranking_and_each_stage(logged):
    result, client, traces = logged
    assert len(traces) == QUESTIONS + 1  # and the run's own trace
    texts = {c.chunk_id: c.text for c in result.chunks}
    for q in result.dataset.queries:
        trace = question_trace(result, traces, q.query_id)
        retrieve = span(trace, "retrieve")
        assert retrieve.span_type == "RETRIEVER" and retrieve.parent_id is None  # no pre-stage: it is the root
        assert retrieve.inputs == {"question": q.text}
        hits = result.run.hits[q.query_id][:SHOWN]
        documents = retrieve.outputs
        assert [d["id"] for d in documents] == [h.chunk_id for h in hits]
        assert [d["metadata"]["doc_uri"] for d in documents] == [h.doc_id for h in hits]
        assert [(d["metadata"]["start"], d["metadata"]["end"]) for d in documents] == [(h.start, h.end) for h in hits]
        assert [d["metadata"]["score"] for d in documents] == pytest.approx([h.score for h in hits], rel=1e-12)
        assert [d["metadata"]["leg_ranks"] for d in documents] == [h.leg_ranks for h in hits]
        assert [d["page_content"] for d in documents] == [texts[h.chunk_id][:2000] for h in hits]
        stages = result.run.stages[q.query_id]
        for name in ("leg_vector", "leg_bm25", "fusion"):
            child = span(trace, name)
            assert child.span_type == "RETRIEVER" and child.parent_id == retrieve.span_id
            assert [d["id"] for d in child.outputs] == stages[name][:SHOWN]
        assert span(trace, "embed_query").span_type == "EMBEDDING"
        row = result.per_query.set_index("query_id").loc[q.query_id]
        for name in ("embed_query", "leg_vector", "leg_bm25", "fusion"):
            took = (span(trace, name).end_time_ns - span(trace, name).start_time_ns) / 1e6
            assert took == pytest.approx(row[f"latency_ms_{name}"], abs=1e-5)
        # the Traces tab mixes every run's traces: the name says which run (name, run key) and which question
        run = f"{result.experiment.name} {result.experiment.run_key()[:8]}"
        assert trace.info.tags["mlflow.traceName"] == f"{run} · {q.query_id}"
        # ... and the list's Input column (its default columns are input, output, time) starts with the run, while
        # the root span's inputs, which MLflow's judges read, keep the question alone (asserted above)
        assert trace.info.request_preview == f"{run} · {q.text} (question {q.query_id})"[:500]
        assert retrieve.attributes["kbench.scores"]["chunk_ndcg_at_10"] == round(
            row["chunk_ndcg_at_10"], 4)
    run_trace = traces[trace_id_for(result.run_dir.name, RUN_TRACE)]
    assert {s.name for s in run_trace.data.spans} >= {RUN_TRACE, "load", "chunk", "embed", "store"}
    assert run_trace.info.request_preview == f"{run} · {RUN_TRACE} (the run's own trace: its stages)"


def test_the_labels_are_expectations_on_each_trace(logged):
    result, _, traces = logged
    texts = {d.doc_id: d.text for d in result.dataset.documents}
    for q in result.dataset.queries:
        trace = question_trace(result, traces, q.query_id)
        (expectation,) = [a for a in trace.info.assessments if a.name == EXPECTED_CONTEXT]
        spans = result.dataset.spans[q.query_id]
        assert [(e["doc_uri"], e["start"], e["end"]) for e in expectation.value] == [
            (s.doc_id, s.start, s.end) for s in spans]
        assert [e["content"] for e in expectation.value] == [texts[s.doc_id][s.start:s.end] for s in spans]
        assert expectation.source.source_type == "HUMAN"
        assert expectation.source.source_id.startswith("dataset:demo@")


def test_the_evaluation_table_lists_each_question_with_every_metric_and_its_first_relevant_rank(logged, monkeypatch):
    result, client, _ = logged
    monkeypatch.setenv("MLFLOW_TRACKING_URI", result.tracking_uri)  # load_table searches through the fluent API
    run = client.get_run(result.run_id)
    table = client.load_table(run.info.experiment_id, RESULTS_TABLE, run_ids=[result.run_id]).set_index("query_id")
    per_query = result.per_query.set_index("query_id")
    assert len(table) == QUESTIONS
    for column in ("doc_recall_at_1", "chunk_map_at_5", "span_iou_at_10", "chunk_ndcg_at_10"):
        assert table[column].tolist() == pytest.approx([round(v, 4) for v in per_query.loc[table.index, column]],
                                                       abs=1e-12)  # four decimals, through JSON
    overlap = result.experiment.evaluation.overlap
    for qid, row in table.iterrows():
        hits = [next(c for c in result.chunks if c.chunk_id == h.chunk_id) for h in result.run.hits[qid][:10]]
        ranks = [next((r for r, c in enumerate(hits, 1) if chunk_matches_span(c, s, overlap)), None)
                 for s in result.dataset.spans[qid]]
        found = [r for r in ranks if r is not None]
        expected = min(found) if found else None
        assert (None if pd.isna(row["first_relevant_rank"]) else int(row["first_relevant_rank"])) == expected
        assert row["miss_stage"] == ", ".join(per_query.loc[qid, "miss_stage"])


def test_judge_grades_become_feedback_on_the_traces_that_show_the_chunk(logged, tmp_path, monkeypatch):
    result, client, _ = logged
    monkeypatch.chdir(tmp_path)  # MLflow's default store is ./mlflow.db: nothing may land there
    qid = result.dataset.queries[0].query_id
    first, deep = result.run.hits[qid][0], result.run.hits[qid][SHOWN]  # shown in the trace, and ranked below it
    judgements = [{"query_id": qid, "doc_id": h.doc_id, "start": h.start, "end": h.end, "grade": g}
                  for h, g in ((first, 3), (deep, None))]
    judgements.append({"query_id": qid, "doc_id": "not-ranked.md", "start": 0, "end": 9, "grade": 1})
    out = tmp_path / "judged.qrels"
    write_qrels(out, {}, {"judge_model": "judge-model", "prompt_sha256": PROMPT_SHA256, "k": 10,
                          "runs": [result.run_id], "dataset": "demo", "judgements": judgements})
    report = log_judge_feedback(f"{out}.json", result.tracking_uri, meanings=GRADES, prompt_template=PROMPT)
    assert (report.on_spans, report.on_traces, report.unparsed) == (1, 1, 1)
    trace = client.get_trace(trace_id_for(result.run_dir.name, qid))
    feedback = {a.metadata["chunk_id"]: a for a in trace.info.assessments if a.name == FEEDBACK}
    assert set(feedback) == {first.chunk_id, deep.chunk_id}
    graded = feedback[first.chunk_id]
    assert graded.value == 3 and graded.rationale == f"grade 3: the passage {GRADES[3]}"
    assert graded.source.source_type == "LLM_JUDGE" and graded.source.source_id == "judge-model"
    assert graded.metadata["prompt_sha256"] == PROMPT_SHA256
    assert graded.span_id == span(trace, "retrieve").span_id
    assert feedback[deep.chunk_id].error is not None and feedback[deep.chunk_id].span_id is None
    again = log_judge_feedback(f"{out}.json", result.tracking_uri, meanings=GRADES, prompt_template=PROMPT)
    assert again.written == 0 and again.existing == 2
    assert client.load_prompt("kbench-judge-relevance").template == PROMPT.replace("{query}", "{{query}}").replace(
        "{passage}", "{{passage}}")
    assert ("kbench-judge-relevance", "1") in linked_prompts(client, result.run_id)
    experiment_id = client.get_run(result.run_id).info.experiment_id  # listed on the experiment's Prompts page
    assert f",{experiment_id}," in client.get_prompt("kbench-judge-relevance").tags["_mlflow_experiment_ids"]
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "mlruns").exists()


def test_a_run_folder_exported_to_a_fresh_store_gives_the_same_run(logged, tmp_path):
    result, client, traces = logged
    uri = f"sqlite:///{tmp_path / 'fresh.db'}"
    report = export_run_folder(result.run_dir, uri)
    assert report.created and report.traces.logged == QUESTIONS and report.traces.expectations == QUESTIONS
    fresh = MlflowClient(uri)
    copied, original = fresh.get_run(report.run_id), client.get_run(result.run_id)
    assert copied.data.metrics == original.data.metrics
    assert {k: v for k, v in copied.data.params.items() if k != "workspace"} == {
        k: v for k, v in original.data.params.items() if k != "workspace"}
    for key in (tag.RUN_KEY, tag.RUN_FOLDER, tag.DATASET, tag.FINGERPRINT, tag.MLFLOW_NOTE):
        assert copied.data.tags[key] == original.data.tags[key]
    assert [(d.dataset.name, d.dataset.digest) for d in copied.inputs.dataset_inputs] == [
        (d.dataset.name, d.dataset.digest) for d in original.inputs.dataset_inputs]
    again = {t.info.trace_id: t for t in run_traces(fresh, copied.info.experiment_id, report.run_id,
                                                    include_spans=True)}
    assert set(again) == set(traces)
    for trace_id, trace in traces.items():
        assert [(s.name, s.outputs) for s in again[trace_id].data.spans] == [
            (s.name, s.outputs) for s in trace.data.spans]
    assert {a.name for t in again.values() for a in t.info.assessments} == {EXPECTED_CONTEXT}
    assert {a.path for a in fresh.list_artifacts(report.run_id)} == {a.path for a in client.list_artifacts(result.run_id)}
    twice = export_run_folder(result.run_dir, uri)  # idempotent: the same run, nothing written twice
    assert not twice.created and twice.run_id == report.run_id
    assert (twice.traces.logged, twice.traces.existing, twice.traces.expectations) == (0, QUESTIONS, 0)
    assert not twice.dataset_input
    assert len(fresh.search_runs([copied.info.experiment_id])) == 1


def test_the_export_command_prints_what_it_wrote_and_carries_judge_grades(logged, tmp_path, capsys):
    result, _, _ = logged
    qid = result.dataset.queries[1].query_id
    hit = result.run.hits[qid][0]
    out = tmp_path / "judged.qrels"  # grades judged on the run in its first store, carried to another
    write_qrels(out, {}, {"judge_model": "judge-model", "prompt_sha256": PROMPT_SHA256, "runs": [result.run_id],
                          "judgements": [{"query_id": qid, "doc_id": hit.doc_id, "start": hit.start, "end": hit.end,
                                          "grade": 2}]})
    uri = f"sqlite:///{tmp_path / 'c.db'}"
    assert main(["runs", "export-mlflow", str(result.run_dir), "--tracking-uri", uri,
                 "--judgements", f"{out}.json"]) == 0
    printed = capsys.readouterr().out
    assert "exported run" in printed and (f"traces: {QUESTIONS} question traces + 1 run trace (kbench.run) "
                                      f"({QUESTIONS} question traces written, 0 already there)") in printed
    assert "MLflow: 1 judgements as Feedback" in printed
    trace = MlflowClient(uri).get_trace(trace_id_for(result.run_dir.name, qid))
    (graded,) = [a for a in trace.info.assessments if a.name == FEEDBACK]
    assert graded.value == 2 and graded.metadata["chunk_id"] == hit.chunk_id


def test_the_experiment_opens_on_the_headline_view_and_keeps_a_description_a_person_wrote(logged):
    result, client, _ = logged
    experiment = client.get_experiment(client.get_run(result.run_id).info.experiment_id)
    view = json.loads(experiment.tags[VIEW_TAG])
    assert view["orderByKey"] == "metrics.`chunk_ndcg_at_10`" and view["orderByAsc"] is False
    assert view["selectedColumns"][:3] == ["attributes.`Dataset`", "metrics.`chunk_ndcg_at_10`",
                                           "metrics.`chunk_recall_at_10`"]
    note = experiment.tags[tag.MLFLOW_NOTE]
    assert f"#/experiments/{experiment.experiment_id}/runs?viewStateShareKey={VIEW_KEY}" in note
    client.set_experiment_tag(experiment.experiment_id, tag.MLFLOW_NOTE, "Our team's notes.")
    run_experiment(result.experiment, progress=False)
    tags = client.get_experiment(experiment.experiment_id).tags
    assert tags[tag.MLFLOW_NOTE] == "Our team's notes." and NOTE_HASH_TAG in tags


def test_a_sample_of_questions_is_traced_beyond_the_cap(workspace):
    experiment = load_experiment(make_config(
        workspace, dataset={"name": "demo", "max_queries": 20}, retrieval={"legs": ["bm25"], "top_k": 5},
        tracking={"experiment": "capped", "traces": {"max_queries": 6, "seed": 3}}))
    result = run_experiment(experiment, progress=False)
    ids = [q.query_id for q in result.dataset.queries]
    chosen = traced_query_ids(ids, experiment.tracking.traces)
    assert len(chosen) == 6 and chosen == traced_query_ids(ids, experiment.tracking.traces)
    client = MlflowClient(result.tracking_uri)
    names = {t.info.tags["mlflow.traceName"] for t in run_traces(
        client, client.get_run(result.run_id).info.experiment_id, result.run_id)}
    run = f"{experiment.name} {experiment.run_key()[:8]}"
    assert names == {*(f"{run} · {qid}" for qid in chosen), f"{run} · {RUN_TRACE}"}
    # MLflow counts 7 traces; the run says what they are (issue 42 item 4)
    assert client.get_run(result.run_id).data.tags["kbench.traces"] == "6 question traces + 1 run trace (kbench.run)"
    off = run_experiment(experiment.model_copy(update={"tracking": experiment.tracking.model_copy(update={
        "traces": experiment.tracking.traces.model_copy(update={"enabled": False})})}), progress=False)
    assert not (off.run_dir / "candidates.parquet").exists()
    assert run_traces(client, client.get_run(off.run_id).info.experiment_id, off.run_id) == []
    assert client.get_run(off.run_id).inputs.dataset_inputs  # the dataset input does not depend on traces


def test_questions_published_to_mlflow_are_what_a_run_reads_back(workspace, capsys):
    assert main(["datasets", "publish", "demo", "--name", "demo-questions", "--workspace", str(workspace)]) == 0
    assert "published 98 questions of demo" in capsys.readouterr().out
    sections = dict(retrieval={"legs": ["bm25"], "top_k": 10}, tracking={"experiment": "questions"})
    from_folder = run_experiment(load_experiment(make_config(workspace, **sections)), progress=False)
    from_mlflow = run_experiment(load_experiment(make_config(
        workspace, dataset={"name": "demo", "questions_from": "demo-questions"}, **sections)), progress=False)
    assert [(q.query_id, q.text) for q in from_mlflow.dataset.queries] == [
        (q.query_id, q.text) for q in from_folder.dataset.queries]
    assert from_mlflow.dataset.spans == from_folder.dataset.spans
    assert from_mlflow.metrics["chunk_ndcg_at_10"] == from_folder.metrics["chunk_ndcg_at_10"]
    assert from_mlflow.experiment.run_key() != from_folder.experiment.run_key()  # the records are hashed
    record = read_dataset_record(from_mlflow.run_dir)
    assert record["source"]["questions_from"] == "demo-questions"


def test_a_sweep_winner_is_a_logged_model_its_runs_link_to(workspace):
    data = make_config(workspace, dataset={"name": "demo", "max_queries": 8}, retrieval={"legs": ["bm25"], "top_k": 5},
                       evaluation={"k": [1, 5]}, tracking={"experiment": "sweep-model"})
    data.update(name="sw", sweep={"chunking.chunk_size": [300, 600]})
    outcome = run_sweep(expand_sweep(data), make_executor("local"), report=False, say=lambda _: None)
    client = MlflowClient(outcome.tracking_uri)
    (model,) = client.search_logged_models([outcome.experiment_id])
    assert model.model_type == MODEL_TYPE and model.source_run_id == outcome.winner_run_id
    assert model.tags[tag.SWEEP_WINNER] == outcome.winner
    winner = yaml.safe_load(outcome.winner_config.read_text())
    assert model.params["chunking.chunk_size"] == str(winner["chunking"]["chunk_size"])
    assert model.metrics and {m.key for m in model.metrics} >= {"chunk_ndcg_at_5"}
    for run_id in (outcome.parent_run_id, outcome.winner_run_id):
        assert [m.model_id for m in client.get_run(run_id).inputs.model_inputs] == [model.model_id]
    view = json.loads(client.get_experiment(outcome.experiment_id).tags[VIEW_TAG])
    assert f"tags.`{tag.KNOB_PREFIX}chunking.chunk_size`" in view["selectedColumns"]
    assert view["orderByKey"] == f"metrics.`{outcome.headline}`"


def test_a_logged_run_whose_traces_cannot_be_written_says_how_to_write_them(workspace, monkeypatch, capsys):
    import kbench.tracking.mlflow_export as export

    def store_refuses(*args, **kwargs):  # a tracking server that takes runs but not spans
        raise ConnectionError("POST /v1/traces: 501 Not Implemented")

    monkeypatch.setattr(export, "log_traces", store_refuses)
    config = workspace / "c.yaml"
    config.write_text(yaml.safe_dump(make_config(workspace, dataset={"name": "demo", "max_queries": 3},
                                                 retrieval={"legs": ["bm25"], "top_k": 5})))
    assert main(["run", str(config), "--quiet"]) == 2
    captured = capsys.readouterr()
    assert "chunk-level" in captured.out  # the metrics are printed first
    (error,) = [line for line in captured.err.splitlines() if line.startswith("kbench: error:")]
    run_dir = next((workspace / "runs").iterdir())
    assert "is logged, but its MLflow traces, dataset input or prompts could not be written (ConnectionError: " \
           "POST /v1/traces: 501 Not Implemented)" in error
    assert f"kbench runs export-mlflow {run_dir}" in error and error.endswith(f"the results are in {run_dir}")
    client = MlflowClient(f"sqlite:///{workspace / 'mlflow.db'}")
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert run.info.status == "FINISHED" and "501 Not Implemented" in run.data.tags[tag.EXPORT_ERROR]
    monkeypatch.undo()
    report = export_run_folder(run_dir)  # once the store takes spans: the same run gets its traces
    assert not report.created and report.run_id == run.info.run_id and report.traces.logged == 3
