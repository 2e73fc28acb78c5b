"""kbench judge on two real BM25 runs of the demo set, against the deterministic OpenAI-compatible test server:
pooling, only unlabeled pairs sent, prompts and parsing, the cache, qrels with provenance, judged_at_k, the
judged qrels used by a run, and calibration; Cohen's kappa on hand-built tables."""
from __future__ import annotations

import json
import math
import re
import time

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from kbench.cli import main as kbench_main
from kbench.config import load_experiment
from kbench import DatasetConfig, load_dataset
from kbench.judging import PROMPT_SHA256, cohen_kappa, confusion, judge_prompt, parse_grade
from kbench.judging.rescore import JudgedQrels, compare_judged
from kbench.runner import run_experiment
from tests.enrichment import chat_server

WORD = re.compile(r"[a-z]{4,}")


def grader(prompt: str) -> str:
    """A stand-in judge: the grade is how many of the query's long words the passage holds (0-3)."""
    if not prompt.startswith("Judge how relevant"):
        return chat_server.answer(prompt)
    query = prompt.split("Query: ", 1)[1].split("\n", 1)[0]
    passage = prompt.split("Passage:\n", 1)[1].rsplit("\n\nThink about", 1)[0]
    shared = set(WORD.findall(query.lower())) & set(WORD.findall(passage.lower()))
    return "unsure" if "webhook" in query.lower() and len(shared) == 1 else f"##final score: {min(3, len(shared))}"


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setattr(chat_server, "answer", grader)
    monkeypatch.setenv("KBENCH_TEST_KEY", "local-secret")
    state = chat_server.start_chat_server()
    yield state
    state.close()


@pytest.fixture
def two_runs(workspace, config_for):
    ids = []
    for size in (400, 900):
        config = load_experiment(config_for(dataset={"name": "demo", "max_queries": 12, "seed": 1},
                                            chunking={"strategy": "fixed", "chunk_size": size, "chunk_overlap": 0},
                                            retrieval={"legs": ["bm25"], "top_k": 10},
                                            evaluation={"k": [5, 10]}))
        ids.append(run_experiment(config, progress=False, log=True).run_id)
    return ids


def judge_args(server, workspace, *extra):
    return ["judge", *extra, "--base-url", server.base_url, "--model", "judge-model", "--api-key-env",
            "KBENCH_TEST_KEY", "--workspace", str(workspace / "judge"),  # its own cache/, not the shared one
            "--tracking-uri", f"sqlite:///{workspace / 'mlflow.db'}"]


def test_judge_pools_runs_and_writes_qrels(two_runs, server, workspace, config_for, capsys):
    out = workspace / "judged.qrels"
    assert kbench_main(judge_args(server, workspace, *two_runs, "--out", str(out), "--k", "5")) == 0
    printed = capsys.readouterr().out
    provenance = json.loads((workspace / "judged.qrels.json").read_text())
    sent = len(server.requests)
    # every pooled pair is judged, labelled or not: PPI needs the model's grade on the relevant passages too
    assert sent == len(provenance["judgements"]) == provenance["pooled"] > provenance["already_labeled"] > 0
    assert provenance["judge_model"] == "judge-model" and len(provenance["prompt_sha256"]) == 64
    assert provenance["runs"] == two_runs and provenance["already_labeled"] > 0
    assert all(r["prompt"].startswith("Judge how relevant") for r in server.requests)
    assert provenance["unparsed"] == sum(j["grade"] is None for j in provenance["judgements"]) > 0
    lines = out.read_text().splitlines()
    assert lines and all(re.fullmatch(r"\S+ 0 \S+ [0-3]", ln) for ln in lines)
    assert "judged_at_5 before" in printed
    before, after = [float(x) for x in printed.split("\n")[-3].split()[-2:]]
    assert after > before
    assert "local-secret" not in out.read_text() + (workspace / "judged.qrels.json").read_text()

    # a re-run asks nothing: every judgement comes from the cache
    assert kbench_main(judge_args(server, workspace, *two_runs, "--out", str(out), "--k", "5")) == 0
    assert len(server.requests) == sent and f"({sent} from the cache)" in capsys.readouterr().out

    # a run reads the judged qrels beside the dataset's labels: more of its top k carries a label
    base = config_for(dataset={"name": "demo", "max_queries": 12, "seed": 1},
                      chunking={"strategy": "fixed", "chunk_size": 400, "chunk_overlap": 0},
                      retrieval={"legs": ["bm25"], "top_k": 10}, evaluation={"k": [5, 10]})
    plain = run_experiment(load_experiment(base), progress=False, log=False).metrics
    base["dataset"]["judged_qrels"] = str(out)
    judged = run_experiment(load_experiment(base), progress=False, log=False).metrics
    assert judged["judged_at_5"] > plain["judged_at_5"]
    assert judged["chunk_ndcg_at_10"] == plain["chunk_ndcg_at_10"]  # span metrics keep the spans


def test_compare_rescores_logged_runs_with_judged_qrels_to_the_bit(two_runs, server, workspace, config_for, capsys):
    qrels = workspace / "judged.qrels"
    assert kbench_main(judge_args(server, workspace, *two_runs, "--out", str(qrels), "--k", "10")) == 0
    capsys.readouterr()
    uri = f"sqlite:///{workspace / 'mlflow.db'}"
    assert kbench_main(["compare", *two_runs, "--judged-qrels", str(qrels), "--tracking-uri", uri,
                        "--out", str(workspace / "cmp")]) == 0
    printed = capsys.readouterr().out
    assert "judge model judge-model" in printed and f"prompt sha256 {PROMPT_SHA256[:12]}" in printed
    assert "judged_at_10 logged" in printed and "doc_ndcg_at_10" in printed
    assert "judge model judge-model" in (workspace / "cmp" / "report.md").read_text()

    sent = len(server.requests)
    for use in ("beside", "instead"):
        judged = compare_judged(two_runs, JudgedQrels.read(qrels, use), tracking_uri=uri)
        assert len(server.requests) == sent  # re-scoring asks no judge and retrieves nothing
        assert judged.comparison.metrics == ["doc_ndcg_at_10", "doc_recall_at_10", "doc_mrr_at_10"]
        if use == "beside":
            assert (judged.judged_at_k["with_judged"] > judged.judged_at_k["logged"]).all()
        for size, scores in zip((400, 900), sorted(judged.comparison.runs, key=lambda r: two_runs.index(r.run_id))):
            config = config_for(dataset={"name": "demo", "max_queries": 12, "seed": 1, "judged_qrels": str(qrels),
                                         "judged_qrels_use": use},
                                chunking={"strategy": "fixed", "chunk_size": size, "chunk_overlap": 0},
                                retrieval={"legs": ["bm25"], "top_k": 10}, evaluation={"k": [5, 10]})
            fresh = run_experiment(load_experiment(config), progress=False, log=False)
            expected = fresh.per_query.set_index("query_id").loc[scores.per_query.index]
            columns = [c for c in expected.select_dtypes("number") if c.startswith(("doc_", "chunk_", "judged_at"))]
            assert len(columns) > 20
            for column in columns:  # equal to the bit, NaN where NaN
                np.testing.assert_array_equal(scores.per_query[column].to_numpy(), expected[column].to_numpy(),
                                              err_msg=f"{use} {size} {column}")
                assert scores.summary[column] == fresh.metrics[column] or np.isnan(fresh.metrics[column])


def test_rescoring_refuses_qrels_judged_on_another_dataset(two_runs, workspace, capsys):
    qrels = workspace / "other.qrels"
    qrels.write_text("q1 0 d1 2\n")
    qrels.with_name("other.qrels.json").write_text(json.dumps({"dataset": "scifact", "judge_model": "m"}))
    with pytest.raises(SystemExit) as exit_:  # a user error: one line and exit 2, from the CLI's one handler
        kbench_main(["compare", *two_runs, "--judged-qrels", str(qrels),
                     "--tracking-uri", f"sqlite:///{workspace / 'mlflow.db'}"])
    assert exit_.value.code == 2
    assert "judged on dataset 'scifact'" in capsys.readouterr().err


def test_judged_qrels_keep_the_sampled_corpus(tmp_path):
    """dataset.judged_qrels merge after sampling: a judged document outside the sample does not change it."""
    plain = load_dataset(DatasetConfig(name="demo", max_queries=5, max_documents=8, seed=3))
    outside = next(d.doc_id for d in load_dataset(DatasetConfig(name="demo")).documents
                   if d.doc_id not in {x.doc_id for x in plain.documents})
    qrels = tmp_path / "j.qrels"
    qrels.write_text("".join(f"{q.query_id} 0 {outside} 3\n" for q in plain.queries) + "not-a-query 0 x 1\n")
    judged = load_dataset(DatasetConfig(name="demo", max_queries=5, max_documents=8, seed=3, judged_qrels=str(qrels)))
    assert [d.doc_id for d in judged.documents] == [d.doc_id for d in plain.documents]
    assert all(judged.qrels[q.query_id][outside] == 3 for q in plain.queries) and "not-a-query" not in judged.qrels


def test_calibration_reports_kappa_and_the_table(two_runs, server, workspace, capsys):
    assert kbench_main(judge_args(server, workspace, *two_runs, "--calibrate", "--sample", "20",
                                  "--concurrency", "1", "--timeout-s", "30")) == 0  # the policy for kbench serve
    out = capsys.readouterr().out
    assert "Cohen's kappa" in out and "label 1" in out
    table = [[int(x) for x in line.split()[2:]] for line in out.splitlines() if line.startswith("label")]
    judged = sum(map(sum, table)) + int(re.search(r"\((\d+) answers unparsed", out).group(1))
    assert judged == len(server.requests) <= 20  # half relevant, half not, as far as the pool has them
    assert sum(table[1]) > 0 and sum(table[0]) > 0


def test_calibration_takes_qrels_that_hold_only_positives(server, workspace, config_for, capsys):
    """SciFact's qrels name only relevant abstracts, a real set's usual shape; --calibrate refused them ("needs labeled
    pairs of both kinds"). The pooled abstracts they do not grade now count as not relevant, and the line says so."""
    ids = []
    for k1 in (1.2, 0.9):
        config = config_for(name=f"bm25-k1-{k1}", dataset={"name": "scifact", "max_queries": 12, "max_documents": 200,
                                                           "seed": 1},
                            evaluation={"k": [5, 10]},
                            retrieval={"legs": ["bm25"], "top_k": 10, "leg_params": {"bm25": {"k1": k1}}})
        config["chunking"] = {"strategy": "none"}  # one unit per abstract
        ids.append(run_experiment(load_experiment(config), progress=False, log=True).run_id)
    assert kbench_main(judge_args(server, workspace, *ids, "--calibrate", "--sample", "16", "--k", "5")) == 0
    out = capsys.readouterr().out
    assert "calibration on" in out and "Cohen's kappa" in out
    assert re.search(r"\d+ of its not-relevant pairs are pooled documents the qrels do not grade, counted as not "
                     r"relevant", out)
    table = [[int(x) for x in line.split()[2:]] for line in out.splitlines() if line.startswith("label")]
    assert sum(table[0]) > 0 and sum(table[1]) > 0


def test_prompt_and_parsing():
    prompt = judge_prompt("how do retries work", "Jobs retry three times.")
    assert "Query: how do retries work" in prompt and "Jobs retry three times." in prompt and "{" not in prompt
    assert parse_grade("##final score: 2") == 2
    assert parse_grade("Final Score: **3**") == 3
    assert parse_grade("I'd say 1") == 1
    assert parse_grade("between 1 and 2") is None and parse_grade("no idea") is None and parse_grade("7") is None
    assert parse_grade("##final score: 0, 1, 2, 3") is None  # SmolLM2 echoing the scale is no grade 0
    assert parse_grade("##Final Score: 2 (of 3)") is None and parse_grade("final score: 2.") == 2


def test_cohen_kappa_on_hand_built_tables():
    # 2x2: 20 agree yes, 15 agree no, 5 + 10 disagree: p_o = 0.7, p_e = (25*30 + 25*20)/50^2 = 0.5, kappa 0.4
    a = [1] * 20 + [0] * 15 + [1] * 5 + [0] * 10
    b = [1] * 20 + [0] * 15 + [0] * 5 + [1] * 10
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    assert cohen_kappa(a, b) == pytest.approx(cohen_kappa_score(a, b))
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 4, 200).tolist(), rng.integers(0, 4, 200).tolist()
    assert cohen_kappa(x, y) == pytest.approx(cohen_kappa_score(x, y))
    assert cohen_kappa([1, 0, 1], [1, 0, 1]) == 1.0
    assert confusion([0, 1, 1], [3, 2, 2], [0, 1], [0, 1, 2, 3]).tolist() == [[0, 0, 0, 1], [0, 0, 2, 0]]


# --------------------------------------------------------------------------- a judge that fails says so
def test_a_judge_whose_answers_hold_no_grade_exits_2_and_writes_nothing(two_runs, server, workspace, capsys):
    """The trap: with the bundled model 54 of 56 answers had no grade; the judge exited 0 and wrote qrels from
    the 2 others. Below 80% usable it now stops early, with the count, the model and the fix."""
    server.reply = lambda prompt: "The passage is relevant to the query because it talks about it."
    out = workspace / "judged.qrels"
    with pytest.raises(SystemExit) as stopped:
        kbench_main(judge_args(server, workspace, *two_runs, "--out", str(out), "--k", "5", "--concurrency", "1"))
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    (line,) = [x for x in err.splitlines() if x.startswith("kbench: error:")]
    pairs = int(re.search(r"\(of (\d+)\)", line).group(1))
    stop = pairs - math.ceil(0.8 * pairs) + 1  # the first answer past the 20% that may be unusable
    assert line == (f"kbench: error: judge: 0 of the first {stop} (of {pairs}) answers usable ({stop} unusable, 0 "
                    "failed) from model judge-model, below the floor of 80% (llm.policy.min_usable); use a stronger "
                    "judge model (--model), and measure it first with --calibrate; or keep going "
                    "on what is usable with --allow-partial (llm.policy.allow_partial: true)")
    assert not out.exists() and not out.with_name("judged.qrels.json").exists()
    assert len(server.requests) == stop < pairs  # stopped once 80% could no longer be usable
    assert "judge (judge-model): " in err and "stopped early" in err  # the progress line said it

    # --allow-partial: the grades that came are written, loudly, and the provenance says "partial"
    server.reply = lambda prompt: grader(prompt) if len(server.requests) % 2 else "no idea"
    assert kbench_main(judge_args(server, workspace, *two_runs, "--out", str(out), "--k", "5",
                                  "--allow-partial")) == 0
    captured = capsys.readouterr()
    assert "kbench: WARNING: judge: " in captured.err and "WARNING: --allow-partial" in captured.out
    assert json.loads(out.with_name("judged.qrels.json").read_text())["partial"] is True


def test_judge_takes_a_sweep_parent_id(workspace, server, config_for, capsys):
    """The trap: `kbench judge <sweep parent id>` (its help: "e.g. every config of a sweep") was a traceback."""
    from kbench.sweep import expand_sweep, make_executor, run_sweep

    data = config_for(dataset={"name": "demo", "max_queries": 8, "seed": 1},
                      retrieval={"legs": ["bm25"], "top_k": 10}, evaluation={"k": [5, 10]})
    data["sweep"] = {"chunking.chunk_size": [400, 900]}
    outcome = run_sweep(expand_sweep(data), make_executor("local"), report=False, say=lambda line: None)
    out = workspace / "sweep.qrels"
    assert kbench_main(judge_args(server, workspace, outcome.parent_run_id, "--out", str(out), "--k", "5")) == 0
    printed = capsys.readouterr().out
    provenance = json.loads(out.with_name("sweep.qrels.json").read_text())
    assert sorted(provenance["runs"]) == sorted(outcome.run_ids.values())
    assert "from the top 5 of 2 runs" in printed and "chunk_size=400" in printed
    # a parent given beside other runs is refused with one line
    with pytest.raises(SystemExit) as stopped:
        kbench_main(judge_args(server, workspace, outcome.parent_run_id, outcome.run_ids["chunk_size=400"],
                               "--out", str(out)))
    assert stopped.value.code == 2
    assert "is a sweep's parent run: give its id alone" in capsys.readouterr().err


def test_max_queries_judges_whole_pools_of_a_seeded_sample(two_runs, server, workspace, capsys):
    full, sample = workspace / "full.qrels", workspace / "sample.qrels"
    assert kbench_main(judge_args(server, workspace, *two_runs, "--out", str(full), "--k", "5")) == 0
    assert kbench_main(judge_args(server, workspace, *two_runs, "--out", str(sample), "--k", "5",
                                  "--max-queries", "4", "--seed", "7")) == 0
    printed = capsys.readouterr().out
    assert "a seeded sample of 4 questions" in printed
    whole = json.loads(full.with_name("full.qrels.json").read_text())
    part = json.loads(sample.with_name("sample.qrels.json").read_text())
    assert len(part["queries"]) == 4 and part["max_queries"] == 4 and whole["queries"] is None
    # every pair of a sampled question is judged (its whole pool), no pair of another question is
    expected = [j for j in whole["judgements"] if j["query_id"] in set(part["queries"])]
    assert part["judgements"] == expected and len(expected) < len(whole["judgements"])
    again = workspace / "again.qrels"  # the sample is seeded: the same questions again
    assert kbench_main(judge_args(server, workspace, *two_runs, "--out", str(again), "--k", "5",
                                  "--max-queries", "4", "--seed", "7")) == 0
    assert json.loads(again.with_name("again.qrels.json").read_text())["queries"] == part["queries"]

    # compared on the sampled questions only, each run's judged_at_k printed; a pool below --min-judged marked
    uri = f"sqlite:///{workspace / 'mlflow.db'}"
    assert kbench_main(["compare", *two_runs, "--judged-qrels", str(sample), "--tracking-uri", uri,
                        "--min-judged", "0.99", "--out", str(workspace / "cmp")]) == 0
    printed = capsys.readouterr().out
    assert "4 queries" in (workspace / "cmp" / "report.md").read_text()
    assert "judged_at_10 with judged" in printed and "THIN (< 0.99) †" in printed
    assert "† computed on a thin pool" in printed and "thin pool:" in (workspace / "cmp" / "report.md").read_text()


def test_the_documented_judge_commands_run_as_written_and_a_dead_endpoint_is_never_replayed(
        two_runs, server, workspace, tmp_path):
    """docs/how-to/judging.md's judge commands as a reader runs them, with this test endpoint in place of `kbench
    serve` (issue 42.7: the page used OPENAI_API_KEY's default, which it never set, and the docs test skips the block
    because SmolLM2 takes minutes, so nothing ran it). Then the same model under a port nobody listens on, with every
    grade in the cache: exit 2 naming the endpoint, nothing written (it said "use a stronger judge model" and never
    contacted the port)."""
    import os
    import socket
    import subprocess

    from kbench.paths import REPO_ROOT
    from tests.docs.blocks import shell_blocks

    block = next(b for b in shell_blocks(REPO_ROOT / "docs" / "how-to" / "judging.md") if "kbench judge" in b.code)
    code = block.code.replace("\\\n", " ").replace("http://127.0.0.1:8000/v1", server.base_url)
    lines = [line for line in code.splitlines() if line.startswith(("export ", "kbench judge"))]
    assert len(lines) == 3
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "KBENCH_LOCAL_KEY", "KBENCH_WORKSPACE")}
    env.update(PATH=f"{REPO_ROOT / '.venv' / 'bin'}{os.pathsep}{env['PATH']}", PYTHONPATH=str(REPO_ROOT),
               RUNS=" ".join(two_runs), MLFLOW_TRACKING_URI=f"sqlite:///{workspace / 'mlflow.db'}")
    done = subprocess.run(["bash", "-c", "set -euo pipefail\n" + "\n".join(lines)], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Cohen's kappa" in done.stdout and (tmp_path / "judged.qrels").read_text().strip()
    assert server.requests and all(r["authorization"] == "Bearer local" for r in server.requests)

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    for url in (dead, server.base_url):  # another URL; then the very URL the grades were cached from, now dead
        if url == server.base_url:
            server.close()
        judge = lines[-1].replace(server.base_url, url).replace("--out judged.qrels", "--out again.qrels")
        started = time.perf_counter()
        done = subprocess.run(["bash", "-c", f"{lines[0]}\n{judge}"], cwd=tmp_path, env=env, capture_output=True,
                              text=True)
        assert done.returncode == 2 and time.perf_counter() - started < 60, done.stderr[-2000:]
        errors = [line for line in done.stderr.splitlines() if line.startswith("kbench: error:")]
        assert len(errors) == 1 and f"cannot connect to {url}" in errors[0], done.stderr[-2000:]
        assert "stronger" not in done.stderr and "Traceback" not in done.stderr
        assert not (tmp_path / "again.qrels").exists()
