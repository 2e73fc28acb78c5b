"""What a command left stale, said nothing of, or refused in a traceback or a riddle (issue 52's smaller items).

Each case is the tester's: a resume where every config is over budget kept the previous winner.yaml and said
"provisional: the set cannot decide: none"; ``kbench run`` said nothing of the binary and Latin-1 documents it
skipped; ``search.seed: -1`` failed with "expected non-negative integer"; an invalid tune candidate printed
pydantic's report; ``compare --sets`` of one sweep twice compared it with itself; a notebook pointed at a broken
dataset failed in a cell, after its MLflow run started; ``--include`` that matched nothing chunked nothing, exit 0;
an ``--out`` root may not write (/proc) passed the check. Now each is one line and exit 2, or says what it did.
"""
from __future__ import annotations

import pytest
import yaml

from kbench.cli import main
from kbench.paths import shared_datasets_dir
from tests.reliability.inputs import config, copy_demo, error_lines, run_kbench, write_yaml

DEMO = {"name": "demo", "max_queries": 12}
BM25 = {"legs": ["bm25"], "top_k": 10}


def only_error(capsys) -> str:
    (line,) = error_lines(capsys.readouterr().err)
    return line


def test_a_resume_where_every_config_is_over_budget_leaves_no_winner(tmp_path):
    workspace = tmp_path / "ws"
    path = write_yaml(tmp_path / "sweep.yaml", {**config(workspace, DEMO, retrieval=BM25),
                                                "sweep": {"chunking.chunk_size": [300, 600]}})
    first = run_kbench("sweep", str(path), "--no-report", cwd=tmp_path)
    assert first.code == 0, first.err[-2000:]
    (winner,) = (workspace / "sweeps").glob("*/winner.yaml")
    (artifact,) = (workspace / "mlruns").glob("*/artifacts/winner.yaml")  # the parent run's copy
    again = run_kbench("sweep", str(path), "--no-report", "--set", "recommend.latency_budget_ms=0.000001", cwd=tmp_path)
    assert again.code == 0, again.err[-2000:]
    assert "recommendation: none: every config is over a budget (p95 latency of total at most 1e-06 ms)" in again.out
    assert "provisional" not in again.out and "cannot decide" not in again.out
    assert "  also on the parent run: the recommendation and ranking as description" in again.out
    assert not winner.exists() and not artifact.exists()  # the last pick does not look current


def test_a_run_says_which_files_of_its_dataset_it_skipped(tmp_path):
    dataset = copy_demo(tmp_path)
    (dataset / "docs" / "blob.md").write_bytes(b"\x00\x01binary\xff")
    (dataset / "docs" / "latin.md").write_bytes("Café crème: a queue in Latin-1.\n".encode("latin-1"))
    path = write_yaml(tmp_path / "run.yaml", config(tmp_path / "ws", {"path": str(dataset), "max_queries": 3},
                                                    retrieval=BM25, tracking={"enabled": False}))
    done = run_kbench("run", str(path), "--quiet", cwd=tmp_path)
    assert done.code == 0, done.err[-2000:]
    assert ("skipped 2 files of the dataset's documents, not indexed: 1 binary (blob.md); 1 not UTF-8 (Latin-1 or "
            "another encoding) (latin.md); save them as UTF-8 to index them (counted as count_skipped_<reason>)"
            in done.out.splitlines())


@pytest.mark.parametrize("argv, words", [
    (["sweep", "{sweep}", "--confirm-half", "--confirm-seed", "-1"], "argument --confirm-seed: -1 is no seed"),
    (["judge", "run-id", "--out", "{out}", "--seed", "-1"], "argument --seed: -1 is no seed"),
    (["models", "train-reranker", "{config}", "--seed", "-1"], "argument --seed: -1 is no seed"),
])
def test_a_negative_seed_is_refused_by_its_option(tmp_path, capsys, argv, words):
    paths = {"sweep": str(tmp_path / "s.yaml"), "out": str(tmp_path / "q.txt"), "config": str(tmp_path / "c.yaml")}
    with pytest.raises(SystemExit) as info:
        main([a.format(**paths) for a in argv])
    assert info.value.code == 2 and f"error: {words}; give a whole number from 0" in capsys.readouterr().err


def test_a_race_seeded_below_0_is_refused_when_the_sweep_loads(tmp_path, capsys):
    path = write_yaml(tmp_path / "race.yaml", {**config(tmp_path / "ws", DEMO, retrieval=BM25),
                                               "sweep": {"chunking.chunk_size": [300, 600]},
                                               "search": {"strategy": "race", "seed": -1}})
    with pytest.raises(SystemExit) as info:
        main(["sweep", str(path)])
    assert info.value.code == 2
    assert only_error(capsys) == (f"kbench: error: {path}: search.seed: Input should be greater than or equal to 0 "
                                  "(got -1)")
    assert not (tmp_path / "ws").exists()


def test_a_tune_candidate_that_is_no_valid_config_is_one_line(tmp_path, capsys):
    path = write_yaml(tmp_path / "tune.yaml", {
        **config(tmp_path / "ws", DEMO, retrieval={"legs": ["bm25", "postgres_fts"], "top_k": 10,
                                                   "fusion": {"strategy": "weighted"}}),
        "search": {"strategy": "tune", "tune": {"weight": [0.5, 1.5]}}})
    assert main(["sweep", str(path)]) == 2
    assert only_error(capsys) == ("kbench: error: search.tune: the candidate weight=1.5 is no valid config: "
                                  "retrieval.fusion.weight: Input should be less than or equal to 1 (got 1.5)")
    assert not (tmp_path / "ws" / "runs").exists()


def test_compare_sets_of_one_sweep_twice_is_refused(capsys):
    assert main(["compare", "--sets", "abc123", "abc123"]) == 2
    assert only_error(capsys) == ("kbench: error: --sets: both are sweep abc123; give the parent runs of two sweeps of "
                                  "the same configs on two question sets")


def test_a_notebook_on_a_broken_dataset_stops_before_its_mlflow_run(tmp_path, capsys):
    dataset = copy_demo(tmp_path)
    with open(dataset / "questions.jsonl", "a", encoding="utf-8") as f:
        f.write('{"query_id": "broken\n')
    lines = (dataset / "questions.jsonl").read_text(encoding="utf-8").count("\n")
    with pytest.raises(SystemExit) as info:
        main(["notebooks", "run", "00_quickstart", "-p", "dataset", str(dataset), "-p", "workspace",
              str(tmp_path / "ws")])
    assert info.value.code == 2
    assert only_error(capsys).startswith(f"kbench: error: -p dataset {dataset}: {dataset / 'questions.jsonl'}:{lines}: "
                                         "not valid JSON")
    assert not (tmp_path / "ws").exists()  # no MLflow run, no notebook written


@pytest.mark.parametrize("argv", [["chunk", "{docs}", "--include", "*.md"],
                                  ["datasets", "build", "synthetic", "{docs}", "--method", "heading", "--include",
                                   "*.nothing", "--out", "{out}"]])
def test_include_globs_that_match_nothing_are_refused(tmp_path, capsys, argv):
    docs = shared_datasets_dir() / "fastapi_docs"
    with pytest.raises(SystemExit) as info:
        main([a.format(docs=docs, out=tmp_path / "set") for a in argv])
    assert info.value.code == 2
    line = only_error(capsys)
    assert line.startswith(f"kbench: error: include ['{argv[argv.index('--include') + 1]}'] matches none of the ")
    assert line.endswith(f"paths under {docs} (a glob matches the path relative to the folder: '*.md' only at its "
                         "top, '**/*.md' in every folder); fix the globs or leave include out")
    assert not (tmp_path / "set").exists()


def test_a_judge_out_that_cannot_be_written_is_refused_before_anything_is_read(capsys):
    """Root may write anywhere os.access looks: /proc takes no new file all the same."""
    assert main(["judge", "no-such-run", "--out", "/proc/judged.qrels"]) == 2
    assert only_error(capsys) == ("kbench: error: --out /proc/judged.qrels: not writable (No such file or directory); "
                                  "give a path you may write")


def test_the_empty_grid_hint_reads_as_the_grid_it_suggests(tmp_path, capsys):
    path = write_yaml(tmp_path / "plain.yaml", config(tmp_path / "ws", DEMO, retrieval=BM25))
    with pytest.raises(SystemExit) as info:
        main(["sweep", str(path)])
    assert info.value.code == 2
    hint = only_error(capsys).split("(add e.g. ", 1)[1].split(", or use", 1)[0]
    assert yaml.safe_load(hint) == {"sweep": {"chunking.chunk_size": [300, 600]}}
