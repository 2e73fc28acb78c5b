"""The optional runtimes a backend runs on (ONNX Runtime, OpenVINO, NNCF), imported when a backend first needs one.

    ov = runtime("openvino", "openvino")          # the module, or a RuntimeMissingError naming the fix
    runtime_versions()                            # {"onnxruntime": "1.32.0", ...}: part of the tuning key

A runtime that is not installed, that does not import (a broken install, a missing shared library), or that lacks
what kbench calls (an ``openvino`` without ``Core``) is a ``RuntimeMissingError``: one line naming the backend,
what failed, what to install and which backend to set instead (the CLI prints it and exits 2; a tuning skips the
backend with that line). Never a traceback from deep inside the library.
"""
from __future__ import annotations

import functools

from kbench.errors import ConfigError, MissingPackageError
from kbench.packages import NOT_INSTALLED, import_problem, install_command, installed_version

# import name -> (PyPI package, what kbench calls on it)
RUNTIMES = {
    "onnxruntime": ("onnxruntime", ("InferenceSession", "SessionOptions", "GraphOptimizationLevel",
                                    "get_available_providers")),
    "onnxruntime.quantization": ("onnxruntime", ("quantize_dynamic", "QuantType")),
    "openvino": ("openvino", ("Core", "save_model")),
    "nncf": ("nncf", ("quantize", "Dataset", "IgnoredScope", "ModelType", "AdvancedQuantizationParameters",
                      "AdvancedSmoothQuantParameters")),
}
# The runtimes each backend imports (torch is a dependency of kbench itself)
BACKEND_RUNTIMES = {"onnx": ("onnxruntime",), "onnx-int8": ("onnxruntime",), "openvino": ("openvino",),
                    "openvino-int8": ("openvino", "nncf")}
# What to set instead when a backend's runtime is missing: one that needs the others (torch is always installed)
INSTEAD = {"onnx": "torch", "onnx-int8": "torch", "openvino": "onnx", "openvino-int8": "onnx"}
# The libraries whose versions change what a backend computes or how fast (the tuning key: tuning.py)
VERSIONED = ("torch", "transformers", "sentence-transformers", "tokenizers", "onnx", "onnxruntime", "openvino",
             "nncf")


class RuntimeMissingError(ConfigError, MissingPackageError):
    """A backend's runtime is missing, broken or lacks what kbench calls; the message names the fix."""


def runtime(name: str, backend: str, stage: str = "embedding"):
    """The module ``name`` (a key of ``RUNTIMES``) for ``stage``'s ``backend``, or a ``RuntimeMissingError``
    (kbench/packages.py imports it: the one helper every optional package goes through)."""
    package, needs = RUNTIMES[name]
    module, problem = import_problem(name, package, needs)
    if problem is not None:
        raise RuntimeMissingError(_message(stage, backend, package, problem))
    return module


def check_runtimes(backend: str, stage: str = "embedding") -> None:
    """Import every runtime ``backend`` needs now, so a missing one fails before an export or any encoding."""
    for name in BACKEND_RUNTIMES.get(backend, ()):
        runtime(name, backend, stage)


def _message(stage: str, backend: str, package: str, problem: str) -> str:
    instead = INSTEAD.get(backend, "torch")
    return (f"{stage}.backend {backend} runs on {package}, which {problem}; install it with "
            f"`{install_command(package, reinstall=problem != NOT_INSTALLED)}`, or set {stage}.backend={instead}")


@functools.cache
def _versions() -> tuple[tuple[str, str], ...]:
    return tuple((name, installed_version(name) or "none") for name in VERSIONED)


def runtime_versions() -> dict[str, str]:
    """The installed version of each library in ``VERSIONED`` ("none" when absent), read once per process without
    importing it."""
    return dict(_versions())
