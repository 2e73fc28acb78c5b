"""A missing or broken optional runtime (OpenVINO, ONNX Runtime) is one line naming the backend and what to install
or set instead, never a traceback (issue 55: `AttributeError: module 'openvino' has no attribute 'Core'`).

Each case shadows the real package on PYTHONPATH with one that is broken the way installs break: an ``__init__``
that raises (a wheel whose shared library is missing) or a module without what kbench calls."""
from __future__ import annotations

import os
import subprocess
import sys
import types

import pytest
import yaml

from kbench.embedding.runtimes import RuntimeMissingError, runtime
from kbench.paths import REPO_ROOT
from tests.conftest import make_config

BROKEN = {
    "raises": "raise ModuleNotFoundError(\"No module named 'openvino._pyopenvino'\")\n",
    "no Core": "__version__ = '2099.0'\n",  # imports, but has nothing kbench calls
}


def test_a_runtime_without_what_kbench_calls_names_the_backend_and_the_fix(monkeypatch):
    monkeypatch.setitem(sys.modules, "openvino", types.ModuleType("openvino"))
    with pytest.raises(RuntimeMissingError) as info:
        runtime("openvino", "openvino")
    message = str(info.value)
    assert message.startswith("embedding.backend openvino runs on openvino, which does not have Core, save_model")
    assert 'pip install --force-reinstall "openvino==' in message and message.endswith("set embedding.backend=onnx")
    assert "\n" not in message


def shadowed(tmp_path, package: str, init: str) -> dict[str, str]:
    """An environment whose ``package`` is a broken one, found before the real one."""
    folder = tmp_path / "shadow" / package
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text(init, encoding="utf-8")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "shadow"), str(REPO_ROOT)]),
            "KBENCH_WORKSPACE": str(tmp_path / "ws")}


@pytest.mark.parametrize("backend, package, broken", [("openvino", "openvino", "raises"),
                                                       ("openvino", "openvino", "no Core"),
                                                       ("onnx", "onnxruntime", "raises")])
def test_a_run_on_a_broken_runtime_is_one_line_and_exit_2(tmp_path, workspace, backend, package, broken):
    config = make_config(workspace, dataset={"name": "demo", "max_queries": 1, "max_documents": 1},
                         embedding={"backend": backend})
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    init = BROKEN[broken].replace("openvino", package)
    command = "import sys; from kbench.cli import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run([sys.executable, "-c", command, "run", str(tmp_path / "run.yaml"), "--quiet"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, env=shadowed(tmp_path, package, init))
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == 2, (done.returncode, done.stderr[-3000:])
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("kbench: error:")]
    assert line.startswith(f"kbench: error: embedding.backend {backend} runs on {package}, which ")
    instead = "torch" if backend == "onnx" else "onnx"
    assert line.endswith(f"set embedding.backend={instead}") and "pip install" in line


def test_a_tuning_measures_the_backends_that_run_and_names_the_one_that_does_not(tmp_path, monkeypatch):
    from kbench.embedding import choice, tuning
    from kbench.embedding.config import EmbeddingConfig

    monkeypatch.setenv("KBENCH_TUNING_DIR", str(tmp_path / "tuning"))
    monkeypatch.setattr(tuning, "_kept", {})
    monkeypatch.setattr(choice, "_choices", {})
    monkeypatch.setitem(sys.modules, "openvino", types.ModuleType("openvino"))  # imports, has nothing
    sample = tuning.demo_sample()
    said = []
    tuned = tuning.tune("paraphrase-MiniLM-L3-v2", tuning.TuningSample(sample.passages[:8], sample.questions[:4], "8"),
                        tmp_path / "exports", say=said.append)
    assert [r.backend for r in tuned.rows] == ["onnx"]  # its reference, measured
    assert tuned.skipped["openvino"].startswith("embedding.backend openvino runs on openvino, which does not have Core")
    assert any(line.startswith("openvino: skipped: embedding.backend openvino runs on openvino") for line in said)
    exact = choice.choice_for(EmbeddingConfig(model="paraphrase-MiniLM-L3-v2"))
    assert exact.backend == "onnx"
