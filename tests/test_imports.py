"""What start-up imports, in fresh interpreters: a contract, not a timing (benchmarks/startup.py times it).

``import kbench`` and the ``kbench`` command's own start load no heavy library; a command's parser (its --help, a
mistyped option) and a config (a refused run) load none either; a BM25 run never loads torch, nor does an
exported backend's encoder (onnx, onnx-int8, openvino) once its file exists. A test names the
heavy modules it found and what imported them, read from ``python -X importtime``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import yaml

from kbench.cli import COMMANDS
from kbench.paths import REPO_ROOT

# Libraries that take from half a second to seconds to import (the list and their kin).
HEAVY = ("scipy", "pandas", "mlflow", "torch", "sentence_transformers", "openvino", "ragas", "duckdb", "faiss",
         "transformers", "onnxruntime", "papermill", "nbformat", "matplotlib", "py3langid")
TORCH = ("torch", "sentence_transformers", "transformers")


def modules_after(code: str, env: dict[str, str] | None = None, cwd=REPO_ROOT) -> list[str]:
    """Every module in ``sys.modules`` once ``code`` ran in a fresh interpreter (the last line it prints)."""
    script = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, cwd=cwd,
                          env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def importers(code: str, names: list[str]) -> str:
    """Who imported each of ``names`` first (``-X importtime``'s nesting), to name in a failure."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True,
                          timeout=600, cwd=REPO_ROOT)
    rows = [(len(line.split("|")[2]) - len(line.split("|")[2].lstrip()), line.split("|")[2].strip())
            for line in done.stderr.splitlines() if line.startswith("import time:") and line.count("|") == 2]
    chains = []
    for name in names:
        for i, (depth, module) in enumerate(rows):
            if module == name:
                chain, level = [module], depth
                for up_depth, up in rows[i + 1:]:
                    if up_depth < level:
                        chain.append(up)
                        level = up_depth
                chains.append(" <- ".join(chain))
                break
    return "; ".join(chains)


def heavy_in(modules: list[str], heavy: tuple[str, ...] = HEAVY) -> list[str]:
    return sorted({m.split(".")[0] for m in modules} & set(heavy))


def test_import_kbench_and_its_cli_load_no_heavy_library():
    for code in ("import kbench", "import kbench, kbench.cli"):
        found = heavy_in(modules_after(code))
        assert not found, f"{code} imported {found}: {importers(code, found)}"


def test_kbench_help_imports_no_command_module():
    code = "from kbench.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass"
    modules = modules_after(code)
    commands = [m for m in modules if m.startswith("kbench.cli.") and m.endswith("_cmd")]
    assert not commands and not heavy_in(modules), (commands, heavy_in(modules))


def test_every_commands_parser_loads_no_heavy_library():
    """Every command's --help and a mistyped option: each parser is built from its module alone."""
    code = "from kbench.cli import build_parser\nbuild_parser()"
    modules = modules_after(code)
    assert {f"kbench.cli.{c.module}" for c in COMMANDS.values()} <= set(modules)  # every command module was read
    found = heavy_in(modules)
    assert not found, f"building every command's parser imported {found}: {importers(code, found)}"


def test_loading_and_keying_a_config_loads_no_heavy_library():
    """A refused run (a missing file, an unknown knob) stops in the config layer, before anything heavy."""
    code = ("from kbench.config import load_experiment\n"
            "for name in ('quickstart.yaml', 'retrieval/rrf_rerank.yaml', 'retrieval/hybrid_multiunit.yaml'):\n"
            "    load_experiment('configs/' + name).run_key()")
    found = heavy_in(modules_after(code))
    assert not found, f"loading configs imported {found}: {importers(code, found)}"


def test_the_command_table_matches_what_each_module_adds():
    from kbench.cli import build_parser

    (action,) = build_parser()._subparsers._group_actions
    assert list(action.choices) == list(COMMANDS)
    assert {a.dest: a.help for a in action._choices_actions} == {name: c.help for name, c in COMMANDS.items()}


def test_a_bm25_run_never_imports_torch(workspace, tmp_path):
    config = {"name": "bm25-only", "workspace": str(workspace), "dataset": {"name": "demo", "max_queries": 10},
              "chunking": {"strategy": "fixed", "chunk_size": 600, "chunk_overlap": 100},
              "retrieval": {"legs": ["bm25"], "top_k": 20}, "evaluation": {"k": [1, 10]},
              "tracking": {"experiment": "imports"}}
    path = tmp_path / "bm25.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    code = f"from kbench.cli import main\nassert main(['run', {str(path)!r}, '--quiet']) == 0"
    modules = modules_after(code, cwd=tmp_path)
    assert "kbench.retrieval.legs.bm25" in modules and "mlflow" in modules  # it ran, searched and logged
    assert not heavy_in(modules, TORCH), heavy_in(modules, TORCH)


def test_an_exported_backend_encodes_without_torch(tmp_path):
    """openvino, onnx and onnx-int8 run the exported file: once it exists, encoding imports no torch (the export
    itself is torch's, done once per model and export version)."""
    from kbench.embedding.config import EmbeddingConfig
    from kbench.embedding.stage import load_encoder

    exports = tmp_path / "exports"
    for backend in ("onnx", "onnx-int8", "openvino"):
        load_encoder(EmbeddingConfig(backend=backend), exports=exports)  # exports in this process, with torch
    for backend in ("onnx", "onnx-int8", "openvino"):
        code = (f"from kbench.embedding.config import EmbeddingConfig\n"
                f"from kbench.embedding.stage import load_encoder\n"
                f"from pathlib import Path\n"
                f"vectors = load_encoder(EmbeddingConfig(backend={backend!r}), exports=Path({str(exports)!r}))"
                f".encode(['how do I add a path parameter?', 'query strings'])\n"
                f"assert vectors.shape == (2, 384), vectors.shape")
        modules = modules_after(code, cwd=tmp_path)
        assert "tokenizers" in modules, backend  # it tokenized and encoded
        assert not heavy_in(modules, TORCH), f"{backend}: {importers(code, heavy_in(modules, TORCH))}"
