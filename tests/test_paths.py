"""A run with a workspace writes nothing outside it and the models directory it was given: not into the
checkout (experiments/, datasets/), the current directory, the home directory or the temporary directory.
The embedding backend is openvino-int8, which writes the most: an ONNX export, an int8 model calibrated on
the run's chunks, the vector cache; and the reranker is a cross-encoder on ONNX (its own export)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from kbench.paths import REPO_ROOT, exports_dir
from tests.conftest import CHECKOUT_MODELS, make_config

# .hypothesis is the example database the test process (Hypothesis, on other xdist workers) keeps in the checkout
SKIPPED = {".git", ".venv", "__pycache__", ".hypothesis"}
# Files libraries write on import, whoever imports them (left alone, reported): ONNX Runtime's device id and
# telemetry database in ~/.cache and a .ses file in the temporary directory, OpenVINO's telemetry client id in
# ~/intel, matplotlib's font list in ~/.cache/matplotlib. Anything else in HOME or TMPDIR is kbench's, and a defect.
LIBRARY_FILES = (".cache/Microsoft/DeveloperTools/.onnxruntime/", ".ses", "intel/", ".cache/matplotlib/fontlist-")


def written_since(root: Path, start: float) -> list[Path]:
    """Files (and links) under ``root`` modified after ``start``, outside SKIPPED folders."""
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIPPED]
        for name in files:
            path = Path(folder) / name
            if path.lstat().st_mtime >= start:
                found.append(path)
    return found


@pytest.mark.xdist_group(CHECKOUT_MODELS)  # no other test may write into the checkout meanwhile
def test_a_run_with_a_workspace_writes_nothing_outside_it_and_the_models_directory(tmp_path):
    """Stays slow: a fresh process exports MiniLM to ONNX, converts and calibrates it to OpenVINO int8 and exports
    the cross-encoder, since where those files land is what is checked; the run reads one demo page only."""
    from sentence_transformers import CrossEncoder

    from kbench.embedding.models import resolve_model_path

    roots = {name: tmp_path / name for name in ("ws", "models", "home", "cwd", "tmp")}
    for root in roots.values():
        root.mkdir()
    reranker = roots["models"] / "seeded-minilm-ce"  # a cross-encoder given by path, inside the models dir
    CrossEncoder(str(resolve_model_path("all-MiniLM-L6-v2")), num_labels=1, max_length=128, device="cpu").save(
        str(reranker))
    config = make_config(roots["ws"], dataset={"name": "demo", "max_queries": 1, "max_documents": 1},  # 1 page
                         embedding={"backend": "openvino-int8", "threads": 1},
                         retrieval={"legs": ["vector", "bm25"], "top_k": 10, "fusion": {"strategy": "rrf"}},
                         rerank={"enabled": True, "strategy": "cross_encoder", "model": str(reranker),
                                 "backend": "onnx", "max_candidates": 5})
    (roots["cwd"] / "run.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    env = {**os.environ, "HOME": str(roots["home"]), "TMPDIR": str(roots["tmp"]), "PYTHONPATH": str(REPO_ROOT),
           "KBENCH_MODELS_DIR": str(roots["models"]), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("KBENCH_WORKSPACE", None)
    start = time.time() - 1  # mtimes have a coarse clock on some file systems
    done = subprocess.run([sys.executable, "-c", "import sys; from kbench.cli import main; sys.exit(main(sys.argv[1:]))",
                           "run", "run.yaml", "--quiet"], cwd=roots["cwd"], env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]

    assert written_since(REPO_ROOT, start) == []
    assert [p.name for p in roots["cwd"].iterdir()] == ["run.yaml"]
    for root in (roots["home"], roots["tmp"]):
        kbench_s = [p for p in written_since(root, start) if not str(p.relative_to(root)).startswith(LIBRARY_FILES)]
        assert kbench_s == []
    assert list((roots["ws"] / "runs").iterdir())  # the run's folder, and every export, where they belong
    assert list(roots["models"].glob("exported/*/model-openvino-int8-*/model.xml"))
    assert list(roots["models"].glob("exported/seeded-minilm-ce-*/scorer.onnx"))


def test_exports_live_in_the_models_directory_given_else_in_the_workspace_cache(tmp_path, monkeypatch):
    monkeypatch.delenv("KBENCH_MODELS_DIR", raising=False)
    assert exports_dir(tmp_path / "ws" / "cache") == tmp_path / "ws" / "cache" / "exports"
    monkeypatch.setenv("KBENCH_MODELS_DIR", str(tmp_path / "models"))
    assert exports_dir(tmp_path / "ws" / "cache") == (tmp_path / "models" / "exported").resolve()


def test_a_config_workspace_and_kbench_workspace_that_disagree_say_which_wins(tmp_path, monkeypatch, capsys):
    """Issue 53 item 8: `workspace:` in a config lost to KBENCH_WORKSPACE in silence. The variable still wins (one
    variable moves every command); the run says so once, with both folders."""
    import kbench.paths as paths
    from kbench.paths import workspace_dir

    monkeypatch.setattr(paths, "_said", set())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KBENCH_WORKSPACE", str(tmp_path / "env-ws"))
    assert workspace_dir("mine") == tmp_path / "env-ws"
    assert capsys.readouterr().err == (f"kbench: note: KBENCH_WORKSPACE wins over workspace: mine: writing to "
                                       f"{tmp_path / 'env-ws'}, not {tmp_path / 'mine'} (unset KBENCH_WORKSPACE to "
                                       f"use {tmp_path / 'mine'})\n")
    assert workspace_dir("mine") == tmp_path / "env-ws" and capsys.readouterr().err == ""  # once per process
    assert workspace_dir("env-ws") == tmp_path / "env-ws" and capsys.readouterr().err == ""  # they agree
    assert workspace_dir() == tmp_path / "env-ws" and capsys.readouterr().err == ""  # the config said nothing
    monkeypatch.delenv("KBENCH_WORKSPACE")
    assert workspace_dir("mine") == tmp_path / "mine" and capsys.readouterr().err == ""
