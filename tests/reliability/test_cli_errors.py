"""The CLI's last line of defence: a value rejected after loading is still one line and exit 2."""
from __future__ import annotations

from tests.reliability.inputs import config, error_lines, make_beir, run_kbench, write_yaml


def test_a_run_name_rejected_on_assignment_is_one_line_not_a_traceback(tmp_path):
    beir = make_beir(tmp_path / "beir")
    workspace = tmp_path / "ws"
    path = write_yaml(tmp_path / "c.yaml", config(workspace, {"path": str(beir)}))
    trec = tmp_path / "other.trec"
    trec.write_text("q1 Q0 d2 1 3.5 bm25\nq2 Q0 d3 1 2.0 bm25\n")
    done = run_kbench("import-trec", str(trec), "--config", str(path), "--name", "bad\x01name", "--no-log",
                      cwd=tmp_path)
    assert done.code == 2 and "Traceback" not in done.err
    (line,) = error_lines(done.err)
    assert line.startswith("kbench: error: name: holds a control character (got 'bad\\x01name')")
    assert not (workspace / "runs").exists()


def test_a_config_path_that_is_a_folder_or_missing_is_one_line(tmp_path):
    for target in (tmp_path, tmp_path / "missing.yaml"):
        done = run_kbench("run", str(target), cwd=tmp_path)
        assert done.code == 2
        (line,) = error_lines(done.err)
        assert line == (f"kbench: error: config file not found: {target} "
                        "(give a YAML file, e.g. configs/quickstart.yaml)")
