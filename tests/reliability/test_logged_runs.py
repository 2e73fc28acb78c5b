"""Commands that read logged runs back (gate, compare, judge): arguments checked before the work, one line for
a damaged artifact, nothing left in the temporary folder.

Before: ``kbench gate`` checked ``--margin``, ``--alpha``, ``--json`` and ``--summary`` only after running both
sides; a damaged ``fingerprint.json`` ended in a JSONDecodeError traceback; every artifact read left a
``/tmp/kbench-XXXXXXXX`` folder (104 after one batch); ``kbench judge --out FOLDER`` judged every pair before
failing on the rename (leaving ``.partial-*``); a binary ``--judged-qrels`` was a UnicodeDecodeError traceback.
"""
from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

import pytest
from mlflow.tracking import MlflowClient

from kbench.config import load_experiment
from kbench.runner import run_experiment
from tests.reliability.inputs import config, error_lines, make_beir, run_kbench, write_yaml


@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    """Two runs of the BM25 leg (no model) logged to one workspace, and their config files."""
    root = tmp_path_factory.mktemp("logged")
    dataset = make_beir(root / "beir")
    workspace = root / "ws"
    runs, configs = [], []
    for size in (200, 400):
        data = config(workspace, {"path": str(dataset)}, name=f"bm25-{size}",
                      chunking={"strategy": "fixed", "chunk_size": size, "chunk_overlap": 0})
        configs.append(write_yaml(root / f"c{size}.yaml", data))
        runs.append(run_experiment(load_experiment(data), progress=False).run_id)
    return {"root": root, "workspace": workspace, "runs": runs, "configs": configs, "dataset": dataset,
            "uri": f"sqlite:///{workspace / 'mlflow.db'}"}


def kbench_in(tmp_path: Path, *args: str):
    """``kbench`` with its own temporary folder, to see what it leaves there."""
    tmp = tmp_path / "tmpdir"
    tmp.mkdir(exist_ok=True)
    return run_kbench(*args, cwd=tmp_path, timeout=300, env={"TMPDIR": str(tmp)}), tmp


def run_folders(workspace: Path) -> list[str]:
    return sorted(p.name for p in (workspace / "runs").iterdir())


@pytest.mark.parametrize("option, fragment", [
    (["--margin", "nan"], "--margin: nan must be a finite number >= 0"),
    (["--alpha", "1.5"], "--alpha: 1.5 must be between 0 and 1"),
    (["--json", "{missing}/verdict.json"], "the folder {missing} does not exist"),
    (["--summary", "{folder}"], "--summary {folder}: is a folder; give a file path"),
])
def test_gate_checks_its_options_before_running_either_side(logged, tmp_path, option, fragment):
    before = run_folders(logged["workspace"])
    option = [o.format(missing=tmp_path / "missing", folder=tmp_path) for o in option]
    done, _ = kbench_in(tmp_path, "gate", *map(str, logged["configs"]), "--no-reuse", *option)
    assert done.code == 2, done.err[-2000:]
    (line,) = error_lines(done.err)
    assert fragment.format(missing=tmp_path / "missing", folder=tmp_path) in line, line
    assert "running" not in done.err  # neither side ran ...
    assert run_folders(logged["workspace"]) == before  # ... and no run was made


def test_gate_and_compare_leave_nothing_in_the_temporary_folder(logged, tmp_path):
    gate, tmp = kbench_in(tmp_path, "gate", *logged["runs"], "--tracking-uri", logged["uri"])
    assert gate.code in (0, 1), gate.err[-2000:]
    compare, _ = kbench_in(tmp_path, "compare", *logged["runs"], "--tracking-uri", logged["uri"])
    assert compare.code == 0, compare.err[-2000:]
    assert sorted(p.name for p in tmp.iterdir()) == []


def test_a_damaged_fingerprint_is_one_line_naming_the_run(logged, tmp_path):
    client = MlflowClient(logged["uri"])
    run = logged["runs"][1]
    fingerprint = Path(urlparse(client.get_run(run).info.artifact_uri).path) / "fingerprint.json"
    kept = fingerprint.read_bytes()
    try:
        fingerprint.write_bytes(kept[: len(kept) // 2])  # a copy cut short
        done, tmp = kbench_in(tmp_path, "gate", *logged["runs"], "--tracking-uri", logged["uri"])
    finally:
        fingerprint.write_bytes(kept)
    assert done.code == 2 and "Traceback" not in done.err, done.err[-2000:]
    (line,) = error_lines(done.err)
    assert f"run {run}: its fingerprint.json is damaged (JSONDecodeError" in line, line
    assert "re-run its config" in line
    assert sorted(p.name for p in tmp.iterdir()) == []


def test_judge_refuses_an_out_that_is_a_folder_before_judging(logged, tmp_path):
    out = tmp_path / "qrels"
    out.mkdir()
    done, _ = kbench_in(tmp_path, "judge", *logged["runs"], "--out", str(out), "--tracking-uri", logged["uri"],
                        "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--api-key-env", "PATH")
    assert done.code == 2, done.err[-2000:]
    (line,) = error_lines(done.err)
    assert line == f"kbench: error: --out {out}: is a folder; give a file path", line
    assert list(out.iterdir()) == [] and not any(p.name.startswith(".partial") for p in tmp_path.iterdir())


def test_a_binary_judged_qrels_file_is_one_line(logged, tmp_path):
    qrels = tmp_path / "qrels.txt"
    qrels.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe")
    done, _ = kbench_in(tmp_path, "compare", *logged["runs"], "--tracking-uri", logged["uri"],
                        "--judged-qrels", str(qrels))
    assert done.code == 2 and "Traceback" not in done.err, done.err[-2000:]
    (line,) = error_lines(done.err)
    assert f"dataset.judged_qrels: {qrels} is not UTF-8 text" in line, line
