"""requirements.lock: pins every dependency pyproject.toml names, holds no CUDA package, and a missing pin is a
clear failure of `tools/lock.py check` (run by `make install`), never a silent install of whatever is newest."""
from __future__ import annotations

import importlib.util

from kbench.paths import REPO_ROOT

spec = importlib.util.spec_from_file_location("lock_tool", REPO_ROOT / "tools" / "lock.py")
lock_tool = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lock_tool)


def test_the_committed_lock_pins_every_dependency_and_no_cuda_package():
    pins = lock_tool.lock_pins()
    assert not [name for name in pins if name.startswith("nvidia") or name in ("torch", "triton", "kbench")]
    assert all(version and version[0].isdigit() for version in pins.values())
    assert lock_tool.check() == 0


def test_a_dependency_without_a_pin_fails_naming_it(tmp_path, capsys):
    lock = tmp_path / "requirements.lock"
    lock.write_text("".join(f"{name}=={version}\n" for name, version in lock_tool.lock_pins().items()
                            if name != "rank-bm25"), encoding="utf-8")
    assert lock_tool.check(lock) == 1
    err = capsys.readouterr().err
    assert "pyproject.toml asks for rank-bm25, requirements.lock has no pin for it" in err and "make lock" in err


def test_a_cuda_package_in_the_lock_fails(tmp_path, capsys):
    lock = tmp_path / "requirements.lock"
    lock.write_text(lock_tool.LOCK.read_text(encoding="utf-8") + "nvidia-cublas-cu12==12.8.4.1\n", encoding="utf-8")
    assert lock_tool.check(lock) == 1
    assert "nvidia-cublas-cu12==12.8.4.1 must not be in the lock" in capsys.readouterr().err
