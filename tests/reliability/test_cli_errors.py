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


def test_an_embedding_dimension_above_the_models_is_one_line(tmp_path):
    """A ValueError traceback after chunking; now refused when the config loads (a catalogue model, whose width
    is known), or one line when the model loads (a folder, whose width only the model knows)."""
    from kbench.embedding.models import CATALOGUE

    beir = make_beir(tmp_path / "beir")
    folder = CATALOGUE["all-MiniLM-L6-v2"].locate()
    for model, fragment in (("all-MiniLM-L6-v2", "embedding.dimension: 1000 is larger than all-MiniLM-L6-v2's 384"),
                            (str(folder), f"embedding.dimension: 1000 is larger than {folder}'s 384")):
        workspace = tmp_path / "ws"
        path = write_yaml(tmp_path / "c.yaml", config(workspace, {"path": str(beir)},
                                                      retrieval={"legs": ["vector"], "top_k": 5},
                                                      embedding={"model": model, "dimension": 1000}))
        done = run_kbench("run", str(path), "--quiet", cwd=tmp_path)
        assert done.code == 2 and "Traceback" not in done.err, done.err[-2000:]
        assert fragment in done.err and "use a value <= 384" in done.err, done.err
        assert not (workspace / "runs").exists() and not (workspace / "mlflow.db").exists()
