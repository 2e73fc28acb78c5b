"""What a notebook is pointed at: a dataset (a registered name or a folder) and a config file, checked before
anything runs.

    resolve_dataset("demo")                          -> "demo"
    resolve_dataset("../sets/fastapi-heading", cwd)  -> "/abs/path/sets/fastapi-heading"
    resolve_config("my.yaml", cwd)                   -> "/abs/path/my.yaml"

Notebooks execute with the repository as their working directory, so a relative path the user typed is read
from where they typed it (``cwd``), then from the repository (the notebooks' own defaults such as
``configs/quickstart.yaml``). A value that is neither is refused (``NotebookError``: exit 2) naming what
would work, never run on the demo set instead; so is a dataset folder that does not read (a broken questions file).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from kbench.datasets.config import DatasetConfig
from kbench.datasets.registry import DATASETS, is_dataset_folder, load_dataset
from kbench.errors import ConfigError, UserError
from kbench.paths import REPO_ROOT

DATASET_PARAMETERS = ("dataset", "doc_dataset")  # notebook parameters that name a dataset ("" / None: unset)
CONFIG_PARAMETERS = ("config",)  # notebook parameters that name an experiment YAML


class NotebookError(ConfigError):
    """A notebook, profile, parameter, dataset or config that does not exist or cannot be used."""


def _candidates(value: str, cwd: Path | None) -> list[Path]:
    path = Path(value).expanduser()
    if path.is_absolute():
        return [path]
    return [(cwd or Path.cwd()) / path, REPO_ROOT / path]


def resolve_dataset(value: str, cwd: Path | None = None, parameter: str = "dataset") -> str:
    """A registered dataset's name as it is; a dataset folder as its absolute path."""
    if value in DATASETS:
        return value
    for path in _candidates(value, cwd):
        if path.is_dir():
            if is_dataset_folder(path):
                check_readable(path, value, parameter)
                return str(path.resolve())
            raise NotebookError(
                f"-p {parameter} {value}: {path.resolve()} holds no questions (not a BEIR, span or AutoRAG dataset "
                "folder); build an evaluation set from its documents first, e.g. kbench datasets build synthetic "
                f"{value} --method heading --out sets/mine, then -p {parameter} sets/mine")
    raise NotebookError(f"-p {parameter} {value!r}: neither a registered dataset ({', '.join(DATASETS)}) nor a "
                        "folder; give a name from `kbench datasets list` or a dataset folder")


def check_readable(path: Path, value: str, parameter: str) -> None:
    """Read the dataset folder as a run would (its questions, labels and documents): a broken one is refused here, in
    one line naming the file and line, before the notebook's MLflow run starts, not as a failed cell."""
    try:
        load_dataset(DatasetConfig(path=str(path.resolve())))
    except UserError as e:
        raise NotebookError(f"-p {parameter} {value}: {e}") from None


def resolve_config(value: str, cwd: Path | None = None, parameter: str = "config") -> str:
    """An experiment YAML's absolute path."""
    for path in _candidates(value, cwd):
        if path.is_file():
            return str(path.resolve())
    raise NotebookError(f"-p {parameter} {value!r}: no such file (looked in {cwd or Path.cwd()} and {REPO_ROOT}); "
                        "give an experiment YAML, e.g. configs/quickstart.yaml")


def resolve_inputs(parameters: dict[str, Any], cwd: Path | None = None) -> dict[str, Any]:
    """``parameters`` with every dataset and config value checked and made absolute (a name stays a name)."""
    out = dict(parameters)
    for key, value in parameters.items():
        if value in (None, ""):
            continue
        if key in DATASET_PARAMETERS:
            out[key] = resolve_dataset(str(value), cwd, key)
        elif key in CONFIG_PARAMETERS:
            out[key] = resolve_config(str(value), cwd, key)
    return out
