"""kbench datasets import-queries: a query log (CSV, JSON lines, an MLflow experiment's traces) as a set of questions
without labels; what is dropped is counted and never quoted; a run ranks the questions and scores none of them 0."""
from __future__ import annotations

import json

import pytest

from kbench.cli import main as kbench_main
from kbench.config import load_experiment
from kbench.datasets import DatasetError, load_dataset, unlabelled_questions
from kbench.datasets.config import DatasetConfig
from kbench.evalsets import inspect_dataset
from kbench.datasets.query_log import (NEAR_DUPLICATE_TRIGRAMS, NearDuplicates, import_queries, read_log,
                                       secret_like)
from kbench.runner import run_experiment
from tests.conftest import DEMO

DOCS = DEMO / "docs"
KEY = "sk-live-0123456789abcdefghij"  # what must never reach a message, the set or its manifest
BINARY = b"caf\xe9 \xff\xfe broken encoding"


def questions(out) -> list[dict]:
    return [json.loads(line) for line in (out / "questions.jsonl").read_text(encoding="utf-8").splitlines()]


def write_csv(path):
    lines = [b"query,user,ts",
             b"How do I retry a failed job?,ann,1",
             b"how do i retry a failed job,bob,2",  # a duplicate: same words once lowercased, punctuation gone
             b"How do I retry a faild job?,cem,3",  # a near-duplicate: a typo
             b",dan,4",  # empty
             BINARY + b",eve,5",  # not UTF-8
             f"my key is {KEY} why does it fail,fay,6".encode(),  # secret-looking
             b"password: hunter2024 login fails,gus,7",  # secret-looking
             b"What port does lumend expose metrics on?,hal,8",
             b"\"webhook signature, how is it computed\",ida,9",
             b"How do bearer tokens work?,jo,10"]  # about tokens, holds none: kept
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_a_csv_log_becomes_a_set_without_labels_and_drops_are_counted_never_quoted(tmp_path, capsys):
    log = write_csv(tmp_path / "queries.csv")
    out = tmp_path / "real"
    assert kbench_main(["datasets", "import-queries", str(log), "--docs", str(DOCS), "--out", str(out)]) == 0
    printed = capsys.readouterr()
    manifest = json.loads((out / "manifest.json").read_text())
    report = manifest["report"]
    assert manifest["kind"] == "kbench query-log set" and manifest["source"]["column"] == "query"
    assert report["records_read"] == 10 and report["labels"] == "none"
    assert report["dropped"] == {"malformed": 0, "not_text": 0, "empty": 1, "binary": 1, "secret_like": 2,
                                 "too_long": 0, "duplicate": 1, "near_duplicate": 1}
    assert report["near_duplicate_trigram_jaccard"] == NEAR_DUPLICATE_TRIGRAMS == 0.8
    rows = questions(out)
    assert [r["question"] for r in rows] == ["How do I retry a failed job?", "What port does lumend expose metrics on?",
                                            "webhook signature, how is it computed", "How do bearer tokens work?"]
    assert all(r["references"] is None for r in rows) and rows[0]["log_count"] == 3  # its two doubles folded in
    assert "1 duplicate, 1 near-duplicate" in printed.out and "2 secret-like" in printed.out
    everything = printed.out + printed.err + (out / "manifest.json").read_text() + (out / "questions.jsonl").read_text()
    assert KEY not in everything and "hunter2024" not in everything and "broken encoding" not in everything

    dataset = load_dataset(DatasetConfig(path=str(out)))
    assert len(dataset.queries) == 4 and unlabelled_questions(dataset) == [q.query_id for q in dataset.queries]
    assert not dataset.qrels and not dataset.spans and len(dataset.documents) > 20
    inspected = inspect_dataset(dataset)  # kbench datasets inspect: no figure pretends to measure them
    assert inspected.unlabelled == 4 and inspected.reading()[0].startswith("none of the 4 questions carries a label")


def test_errors_about_the_log_never_quote_it(tmp_path):
    log = tmp_path / "q.csv"
    log.write_text(f"{KEY},when\nhow do retries work,1\n")
    with pytest.raises(DatasetError) as refused:
        import_queries(str(log), tmp_path / "out", docs=str(DOCS))
    message = str(refused.value)
    assert "no column named query, question" in message and "--column" in message and KEY not in message
    assert "(not shown)" in message and "'when'" in message  # a header name is shown only when harmless
    with pytest.raises(DatasetError, match="no question left of 2 records") as refused:
        (tmp_path / "keys.txt").write_text(f"{KEY}\n\n")
        import_queries(str(tmp_path / "keys.txt"), tmp_path / "out", docs=str(DOCS))
    assert KEY not in str(refused.value)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "mine.txt").write_text("someone's file")
    with pytest.raises(DatasetError, match="holds files kbench did not write"):
        import_queries(str(log), tmp_path / "out", docs=str(DOCS), column="when", force=True)
    assert (tmp_path / "out" / "mine.txt").exists()


def test_a_jsonl_log_takes_a_dotted_column_or_a_chat_request_and_counts_bad_lines(tmp_path):
    log = tmp_path / "requests.jsonl"
    rows = [{"request": {"query": "How are webhooks signed?"}, "latency_ms": 12},
            {"request": {"query": 42}},  # not text
            {"request": {}},  # the column missing: empty
            "not json at all {",
            {"request": {"query": "How are webhooks signed"}},
            {"request": {"query": "x" * 3000}}]  # too long for a question
    log.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    records, source = read_log(str(log), column="request.query")
    assert [r.reason for r in records] == [None, "not_text", "empty", "malformed", None, "too_long"]
    assert source["format"] == "jsonl" and len(source["sha256"]) == 64
    report = import_queries(str(log), tmp_path / "set", docs=str(DOCS), column="request.query")
    assert report.kept == 1 and report.dropped["duplicate"] == 1

    export = tmp_path / "export.json"  # one array of records, as an export writes it
    export.write_text(json.dumps([{"request": {"query": "How are webhooks signed?"}}, {"request": {"query": None}}]))
    assert [r.reason for r in read_log(str(export), column="request.query")[0]] == [None, "empty"]

    chat = tmp_path / "chat.jsonl"
    chat.write_text("\n".join(json.dumps({"messages": [{"role": "system", "content": "be brief"},
                                                       {"role": "user", "content": q}]})
                              for q in ("What is a queue?", "How do I pause a queue?")) + "\n")
    report = import_queries(str(chat), tmp_path / "chat-set", docs=str(DOCS), max_questions=1, seed=3)
    assert report.kept == 1 and report.distinct == 2
    assert questions(tmp_path / "chat-set")[0]["question"] in ("What is a queue?", "How do I pause a queue?")


def test_an_mlflow_experiments_traces_are_a_log(tmp_path, monkeypatch):
    import mlflow

    monkeypatch.chdir(tmp_path)  # MLflow puts a new experiment's artifacts in ./mlruns

    from kbench.datasets.mlflow_questions import fluent_tracking_uri

    uri = f"sqlite:///{tmp_path / 'app.db'}"
    with fluent_tracking_uri(uri):
        experiment = mlflow.set_experiment("support-bot")

        @mlflow.trace
        def answer(question: str) -> str:
            return "..."

        for q in ("How do I retry a job?", "how do I retry a job", f"token={KEY}", "What does lumend log?"):
            answer(q)
        mlflow.flush_trace_async_logging()
    out = tmp_path / "from-traces"
    assert kbench_main(["datasets", "import-queries", "--mlflow-experiment", "support-bot", "--tracking-uri", uri,
                        "--docs", str(DOCS), "--out", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["source"] == {"kind": "mlflow", "experiment": "support-bot", "column": None}
    assert manifest["report"]["records_read"] == 4 and manifest["report"]["dropped"]["secret_like"] == 1
    assert [r["question"] for r in questions(out)] == ["How do I retry a job?", "What does lumend log?"]
    assert experiment.experiment_id
    with pytest.raises(SystemExit) as refused:
        kbench_main(["datasets", "import-queries", "--mlflow-experiment", "nope", "--tracking-uri", uri,
                     "--docs", str(DOCS), "--out", str(tmp_path / "x")])
    assert refused.value.code == 2


def test_near_duplicates_are_character_trigrams_at_the_threshold():
    texts = ["dependency injection in fastapi", "dependancy injection in fastapi", "path parameters in fastapi",
             "query parameters in fastapi"]
    near = NearDuplicates(texts)
    near.keep(0)
    assert near.match(1) == 0  # one letter apart
    near.keep(2)
    assert near.match(3) is None  # another question sharing words
    assert secret_like(f"use {KEY}") and not secret_like("how do bearer tokens work with an api_key header")


def test_a_run_over_questions_without_labels_ranks_them_and_scores_none_zero(tmp_path, config_for):
    log = write_csv(tmp_path / "queries.csv")
    out = tmp_path / "real"
    import_queries(str(log), out, docs="demo")
    config = config_for(retrieval={"legs": ["bm25"], "top_k": 10}, evaluation={"k": [5, 10]})
    config["dataset"] = {"path": str(out)}
    result = run_experiment(load_experiment(config), progress=False, log=False)
    assert not [m for m in result.metrics if m.startswith(("doc_", "chunk_", "span_"))]  # nothing scored, no 0
    assert result.metrics["judged_at_10"] == 0.0 and result.metrics["count_unlabelled"] == 4
    assert len(result.per_query) == 4 and set(result.per_query.columns) >= {"query_id", "retrieved"}

    # a judge's grades for two of the questions: those two are scored, the others left out (never 0)
    ranked = result.per_query.set_index("query_id")["retrieved"]
    dataset = load_dataset(DatasetConfig(path=str(out)))
    chunk_doc = {q: ranked[q][0].split("#")[0] for q in ranked.index[:2]}
    assert all(d in {x.doc_id for x in dataset.documents} for d in chunk_doc.values())
    judged = tmp_path / "judged.qrels"
    judged.write_text("".join(f"{q} 0 {d} 3\n" for q, d in chunk_doc.items()))
    config["dataset"]["judged_qrels"] = str(judged)
    scored = run_experiment(load_experiment(config), progress=False, log=False)
    assert len(scored.per_query) == 2 and scored.metrics["doc_ndcg_at_10"] > 0
    assert scored.metrics["count_unlabelled"] == 2


def test_a_sweep_over_questions_without_labels_says_to_grade_them_and_picks_nothing(tmp_path, config_for):
    """Every config finishes and none is scored: the sweep says so and names the command that grades the rankings it
    kept (not "no config finished"), writes no winner.yaml and tags no winner."""
    from kbench.sweep import expand_sweep, make_executor, run_sweep
    from kbench.sweep.summary import summary_lines

    out = tmp_path / "real"
    import_queries(str(write_csv(tmp_path / "queries.csv")), out, docs="demo")
    config = config_for(retrieval={"legs": ["bm25"], "top_k": 10}, evaluation={"k": [5, 10]})
    config["dataset"] = {"path": str(out)}
    config["sweep"] = {"chunking.chunk_size": [400, 600]}
    plan = expand_sweep(config)
    found = run_sweep(plan, make_executor("local"), say=lambda s: None)
    assert set(found.status.values()) == {"ran"} and found.unscored and found.winner_config is None
    summary = "\n".join(summary_lines(plan, found))
    assert "no recommendation yet: every config finished, and none is scored" in summary
    assert f"kbench judge {found.parent_run_id} --out judged.qrels" in summary
    assert "no config finished" not in summary and "CompareError" not in summary

    # graded (here: any document of the set, for each question), the sweep picks, and says what its decision rests on
    dataset = load_dataset(DatasetConfig(path=str(out)))
    docs = sorted(d.doc_id for d in dataset.documents)
    judged = tmp_path / "judged.qrels"
    judged.write_text("".join(f"{q.query_id} 0 {docs[i]} 3\n" for i, q in enumerate(dataset.queries)))
    config["dataset"]["judged_qrels"] = str(judged)
    plan = expand_sweep(config)
    graded = run_sweep(plan, make_executor("local"), say=lambda s: None)
    assert not graded.unscored and graded.recommendation is not None
    assert any(line.strip().startswith("the decision rests on real: real questions from a query log (4 questions)")
               for line in graded.recommendation.lines())
