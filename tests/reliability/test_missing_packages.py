"""A package a command needs, missing or broken: one line naming it and its pinned install, exit 2, before any work.

issue 52: with a module that raises ``ModuleNotFoundError`` first on ``PYTHONPATH``, 9 of 13 commands ended in a
traceback (openvino, onnxruntime, distributed, py3langid, PyStemmer, snowballstemmer, papermill, faiss, mlflow),
kbench's own hint arrived as one (``ImportError: stemmer snowball_english needs PyStemmer``), and the faiss case
failed after 106 s of embedding. Each case here shadows one package with a broken one of that name, first on
``PYTHONPATH`` (an ``__init__`` that raises, as a wheel whose shared library is missing does; or one without what
kbench calls), and runs the command that needs it: exit 2, one ``kbench: error:`` line naming the package and
``pip install --force-reinstall "<package>==<pin of requirements.lock>"``, no traceback, nothing written. The
commands run in parallel subprocesses: each is refused in a second or two, so all of them take a few seconds.
"""
from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from kbench.packages import OPTIONAL, locked_version
from kbench.paths import REPO_ROOT
from tests.reliability.inputs import config, error_lines, write_yaml

RAISES = "raise ModuleNotFoundError({message!r}, name={name!r})\n"
LACKS = "__version__ = '0.0'\n"  # imports, and has nothing kbench calls


@dataclass(frozen=True)
class Case:
    package: str  # the import name shadowed
    args: tuple[str, ...]  # the kbench command ({config}, {sweep}, {workspace}, {store}: filled per test)
    says: str  # what the line starts with, after "kbench: error: "
    broken: str = RAISES

    @property
    def id(self) -> str:
        return f"{self.package}-{'lacks' if self.broken == LACKS else 'raises'}-{self.args[0]}"


BM25 = {"legs": ["bm25"], "top_k": 10}
CONFIGS = {  # what each case's {config} holds besides the demo set's first question and document
    "bm25": {"retrieval": BM25, "tracking": {"enabled": False}},
    "logged": {"retrieval": BM25},
    "vector": {"retrieval": {"legs": ["vector"], "top_k": 10}, "tracking": {"enabled": False}},
    "postgres_fts": {"retrieval": {"legs": ["postgres_fts"], "top_k": 10}, "tracking": {"enabled": False}},
    "openvino": {"retrieval": {"legs": ["vector"], "top_k": 10}, "embedding": {"backend": "openvino"},
                 "tracking": {"enabled": False}},
    "onnx": {"retrieval": {"legs": ["vector"], "top_k": 10}, "embedding": {"backend": "onnx"},
             "tracking": {"enabled": False}},
}
CASES = [
    Case("faiss", ("run", "{vector}"), "the FAISS vector index (a vector leg's search) needs faiss-cpu, which is "
                                       "installed"),
    Case("faiss", ("run", "{vector}"), "the FAISS vector index (a vector leg's search) needs faiss-cpu, which does "
                                       "not have IndexFlatIP, IndexIDMap2", LACKS),
    Case("mlflow", ("run", "{logged}"), "logging the run to MLflow (tracking.enabled; kbench run --no-log runs without "
                                        "it) needs mlflow"),
    Case("mlflow", ("runs", "--tracking-uri", "{store}"), "kbench runs needs mlflow"),
    Case("Stemmer", ("run", "{bm25}"), "stemmer snowball_english needs PyStemmer"),
    Case("snowballstemmer", ("run", "{postgres_fts}"), "stemmer postgres_english needs snowballstemmer"),
    Case("py3langid", ("run", "{bm25}"), "the language census every run takes (kbench/language) needs py3langid"),
    Case("papermill", ("notebooks", "run", "00_quickstart", "-p", "workspace", "{workspace}"),
         "kbench notebooks run needs papermill"),
    Case("distributed", ("sweep", "{sweep}", "--executor", "dask"), "--executor dask needs distributed"),
    Case("openvino", ("run", "{openvino}"), "embedding.backend openvino runs on openvino, which is installed"),
    Case("onnxruntime", ("run", "{onnx}"), "embedding.backend onnx runs on onnxruntime, which is installed"),
]


def shadow(root: Path, package: str, broken: str) -> Path:
    folder = root / package
    folder.mkdir(parents=True)
    text = broken.format(message=f"No module named {package!r} (a broken install)", name=package)
    (folder / "__init__.py").write_text(text, encoding="utf-8")
    return root


def run(case: Case, tmp_path: Path, paths: dict[str, str]) -> subprocess.CompletedProcess:
    root = shadow(tmp_path / "shadows" / case.id, case.package, case.broken)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(REPO_ROOT)])}
    env.pop("KBENCH_WORKSPACE", None)
    args = [a.format(**paths) for a in case.args]
    return subprocess.run([sys.executable, "-c", "import sys; from kbench.cli import console_main; "
                           "sys.exit(console_main())", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, tuple[subprocess.CompletedProcess, Path]]:
    """Every case's command, four at a time, each in its own workspace."""
    tmp_path = tmp_path_factory.mktemp("packages")
    demo = {"name": "demo", "max_queries": 1, "max_documents": 1}

    def one(case: Case):
        workspace = tmp_path / "ws" / case.id
        paths = {"workspace": str(workspace), "store": f"sqlite:///{tmp_path / 'empty.db'}"}
        for name, sections in CONFIGS.items():
            paths[name] = str(write_yaml(tmp_path / f"{case.id}-{name}.yaml", config(workspace, demo, **sections)))
        paths["sweep"] = str(write_yaml(tmp_path / f"{case.id}-sweep.yaml", {
            **config(workspace, demo, retrieval=BM25), "sweep": {"chunking.chunk_size": [300, 400]}}))
        return case.id, (run(case, tmp_path, paths), workspace)

    (tmp_path / "empty.db").write_bytes(b"")
    with ThreadPoolExecutor(4) as pool:
        return dict(pool.map(one, CASES))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_a_missing_or_broken_package_is_one_line_naming_its_install(outcomes, case):
    done, workspace = outcomes[case.id]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == 2, (done.returncode, done.stderr[-3000:])
    (line,) = error_lines(done.stderr)
    assert line.startswith(f"kbench: error: {case.says}"), line
    pip = OPTIONAL[case.package].pip
    assert f'pip install --force-reinstall "{pip}=={locked_version(pip)}"' in line, line
    # before any work: no run folder, no vectors embedded, no MLflow run (a notebook's run starts after the check)
    assert not (workspace / "runs").exists() and not (workspace / "cache").exists()
    assert not (workspace / "mlflow.db").exists()


def test_every_package_of_the_issue_has_its_pin_and_a_case():
    shadowed = {case.package for case in CASES}
    assert {"openvino", "onnxruntime", "distributed", "py3langid", "Stemmer", "snowballstemmer", "papermill", "faiss",
            "mlflow"} <= shadowed
    assert all(locked_version(OPTIONAL[name].pip) for name in shadowed)
