"""A package's names, each imported from its module the first time it is used (PEP 562 module ``__getattr__``).

    # kbench/compare/__init__.py
    from kbench.lazy import lazy_exports

    __getattr__, __dir__, __all__ = lazy_exports(__name__, {
        ".compare": ["CompareError", "Comparison", "compare_runs"],
        ".report": ["summary_lines", "write_report"],
    })

``from kbench.compare import compare_runs`` imports ``kbench.compare.compare`` there and then, as an import line in
the package would have. ``from kbench import compare`` runs only the package's ``__init__``: ``compare.compare_runs``
imports its module when first used, and ``compare.frontier`` (a submodule the package does not list) likewise. So
a command that refuses its input before it compares anything has loaded neither pandas nor scipy
(docs/concepts/architecture.md, "Start-up"). kbench imports its own modules by name in three places only: here, the
CLI's command table (kbench/cli/__init__.py) and a registry's declared strategies (kbench/registry.py); every module
itself imports at its top.
"""
from __future__ import annotations

import importlib
import sys
from typing import Any, Callable


def lazy_exports(package: str, modules: dict[str, list[str]]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, __all__)`` for ``package``: each name of ``modules[module]`` is read from
    ``module`` (relative to the package when it starts with a dot) on first use and kept in the package."""
    where = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:  # a submodule, e.g. ``tracking.read`` before anything imported it
            if name.startswith("__"):
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            try:
                return importlib.import_module(f"{package}.{name}")
            except ModuleNotFoundError as e:
                if e.name != f"{package}.{name}":
                    raise  # the submodule exists and something it imports is missing: say that
                raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)  # the next use is a plain attribute
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__, list(where)


class LazyModule:
    """A module imported when one of its names is first read (a module-level name, unlike an import line)."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        module = importlib.import_module(self._name)
        self.__dict__.update(vars(module))  # the next read is a plain attribute
        return getattr(module, attribute)

    def __repr__(self) -> str:
        return f"<module {self._name!r}, imported on first use>"


def lazy_module(name: str) -> Any:
    """``stats = lazy_module("scipy.stats")`` at a module's top, beside its imports: for a library that takes long
    to import and that a module's functions use but its importers do not need (``kbench.config`` reaches
    evaluation/significance.py for a config class, never for a test). Nothing is imported until ``stats.x`` is read;
    ``sys.modules`` holds it only then."""
    return LazyModule(name)
