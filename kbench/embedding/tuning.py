"""Backend tuning: how fast every backend of a model runs on this machine, and how far each one drifts from the
exact reference, measured once per model and machine and kept (as FFTW keeps its wisdom).

    tuned = stored_tuning("all-MiniLM-L6-v2")                    # the kept result for this machine, or None
    tuned = tune("all-MiniLM-L6-v2", demo_sample(), exports)     # measure now (under a lock), keep, return it
    tuned.rows                                                   # one Measured per backend, the reference first

What is timed: every backend the model runs on that imports here (torch, onnx, onnx-int8, openvino at OpenVINO's
own precision and, where that is not f32, openvino at f32 too, openvino-int8 calibrated on the sample), each
encoding the sample's passages in batches as a run does (``embedding`` defaults: batch 64, the runtime's threads),
in two interleaved rounds, the faster kept. Exports already built are reused (``exports``: a run's own folder).

What is measured without labels, against the reference (torch; the f32 ONNX file of a model without torch weights):

- cosine error: 1 - cosine of each vector to the reference's, over the passages and the questions (in a batch and
  alone); its mean and its worst;
- top-10 overlap: the rank-biased overlap (p = 0.9, extrapolated at depth 10: 1 for the same ten in the same
  order) of each question's top 10 over the sample's passages with the reference's; mean and worst decile (the
  10th percentile). Twice: the questions encoded in one batch (``retrieval.latency: batch``) and each alone (one
  query, ``query_threads``), since dynamic int8 quantizes each batch at its own range and a question's vector then
  depends on its batch-mates;
- batch dependence: the worst cosine error between a question encoded alone and the same question in the batch.

Kept as JSON in ``tuning_dir()`` (``models_dir()/tuning``, or ``KBENCH_TUNING_DIR``), one file per model and
machine key: the model's name and revision, the machine (cpu.py ``machine``: CPU model, flags, cores, instruction
caps), the runtimes' versions, kbench's version and the recipes that change vectors (export, int8, OpenVINO int8).
A change in any of them is another key, so it is measured again; the file of the old key stays (another venv on the
same machine may still use it). Which backend ``exact`` and ``fast`` then run is choice.py's, from these figures.
"""
from __future__ import annotations

import fcntl
import json
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import numpy as np

from kbench.datasets.config import DatasetConfig
from kbench.datasets.reading import DatasetError
from kbench.datasets.registry import load_dataset
from kbench.embedding.config import EmbeddingConfig
from kbench.embedding.cpu import machine
from kbench.embedding.models import CATALOGUE, TRANSFORMER_BACKENDS, resolve_model_path
from kbench.embedding.onnx_export import EXPORT_VERSION, INT8_VERSION
from kbench.embedding.onnx_runtime import computes_in, openvino_computes_in
from kbench.embedding.openvino_int8 import INT8_RECIPE
from kbench.embedding.registry import EMBEDDING_PROVIDERS
from kbench.embedding.runtimes import RuntimeMissingError, runtime_versions
from kbench.embedding.sentence_transformers import model_revision
from kbench.errors import ConfigError
from kbench.hashing import stable_hash
from kbench.paths import EXPORTED_FOLDER, REPO_ROOT, models_dir
from kbench.records import Dataset, Document, Query

TUNING_VERSION = 1  # bump when what is measured or how changes: every machine is then measured again
PASSAGES, QUESTIONS, PASSAGE_CHARS = 200, 50, 600  # the sample: a few minutes on 2 cores at most, once per machine
MIN_QUESTIONS = 10  # a corpus with fewer questions than this gets stand-ins (the first words of other passages)
ROUNDS = 2
DEPTH, RBO_P = 10, 0.9
DEMO = REPO_ROOT / "datasets" / "demo"


def tuning_dir() -> Path:
    """Where tunings are kept: ``KBENCH_TUNING_DIR``, else ``models_dir()/tuning``."""
    env = os.environ.get("KBENCH_TUNING_DIR")
    return Path(env).expanduser().resolve() if env else models_dir() / "tuning"


def tuning_exports() -> Path:
    """Where a tuning no run asked for (a library call with no exports folder) builds its exports: beside the
    tuning store, ``models_dir()/exported`` by default (where ``exports_dir()`` puts them without a workspace)."""
    return tuning_dir().parent / EXPORTED_FOLDER


# --------------------------------------------------------------------------- the sample
@dataclass(frozen=True)
class TuningSample:
    passages: list[str]
    questions: list[str]
    source: str  # what they were taken from, said with the result

    def prefixed(self, document_prefix: str, query_prefix: str) -> TuningSample:
        """The texts as a run encodes them (``embedding.document_prefix``, ``query_prefix``: e5-style models)."""
        return TuningSample([document_prefix + p for p in self.passages], [query_prefix + q for q in self.questions],
                            self.source)


def cut_passages(text: str, chars: int = PASSAGE_CHARS) -> list[str]:
    """``text`` cut at whitespace into passages of about ``chars`` characters (a last short piece under a quarter of
    that is dropped)."""
    out, words, size = [], [], 0
    for word in text.split():
        words.append(word)
        size += len(word) + 1
        if size >= chars:
            out.append(" ".join(words))
            words, size = [], 0
    if words and size >= chars // 4:
        out.append(" ".join(words))
    return out


def sample_of(documents: Sequence[Document], queries: Sequence[Query], source: str, *, passages: int = PASSAGES,
              questions: int = QUESTIONS, seed: int = 0) -> TuningSample:
    """A seeded sample of a corpus: ``passages`` passages cut from its documents, ``questions`` of its questions
    (stand-ins when it has fewer than ``MIN_QUESTIONS``: the first twelve words of passages outside the sample)."""
    rng = random.Random(seed)
    pool = [p for d in sorted(documents, key=lambda d: d.doc_id) for p in cut_passages(f"{d.title}\n{d.text}")]
    rng.shuffle(pool)
    chosen, rest = pool[:passages], pool[passages:]
    asked = [q.text for q in sorted(queries, key=lambda q: q.query_id) if q.text.strip()]
    if len(asked) >= MIN_QUESTIONS:
        picked = rng.sample(asked, min(questions, len(asked)))
    else:
        picked = [" ".join(p.split()[:12]) for p in (rest or chosen)[:questions]]
        source += " (no questions: the first words of other passages stand in)"
    if not chosen or not picked:
        raise ConfigError(f"backend tuning: {source} gives no passage to encode; tune on another corpus "
                         "(kbench models tune --config CONFIG)")
    return TuningSample(chosen, picked, source)


def dataset_sample(dataset: Dataset) -> TuningSample:
    """``sample_of`` a loaded dataset (a run's own corpus)."""
    return sample_of(dataset.documents, dataset.queries, f"dataset {dataset.name}")


def demo_sample() -> TuningSample:
    """The sample of kbench's demo set (datasets/demo), read without the dataset layer (its files and questions)."""
    if not (DEMO / "questions.jsonl").is_file():
        raise ConfigError(f"backend tuning: the demo set is not here ({DEMO}) to measure on; measure on a config's "
                         "corpus instead: kbench models tune --config CONFIG")
    documents = [Document(str(p.relative_to(DEMO / "docs")), p.read_text(encoding="utf-8", errors="replace"))
                 for p in sorted((DEMO / "docs").rglob("*")) if p.is_file()]
    with (DEMO / "questions.jsonl").open(encoding="utf-8") as f:
        queries = [Query(row["query_id"], row["question"]) for row in (json.loads(line) for line in f if line.strip())]
    return sample_of(documents, queries, "the demo set (datasets/demo)")


def sample_of_dataset(config: DatasetConfig) -> TuningSample:
    """The sample of a config's dataset (the run's own corpus); the demo set's when it cannot be read here (the run
    then fails on it with the loader's own message) or is too small to cut one passage from."""
    try:
        dataset = load_dataset(config)
    except (DatasetError, OSError):
        return demo_sample()
    try:
        return dataset_sample(dataset)
    except ConfigError as too_small:  # a corpus of a few lines: nothing to time a backend on, and no reason to stop
        try:
            demo = demo_sample()
        except ConfigError:
            raise too_small from None
        return TuningSample(demo.passages, demo.questions,
                            f"{demo.source}, as dataset {dataset.name} gives no passage to encode")


# --------------------------------------------------------------------------- the result
@dataclass(frozen=True)
class Measured:
    """One backend on this machine: its speed, and its drift from the reference (the module doc)."""

    backend: str
    precision: str  # what it was asked to compute in (embedding.precision): auto, or f32 for OpenVINO's exact row
    computes_in: str  # what it computed in: f32, bf16, int8/f32, int8/bf16
    chunks_per_s: float
    speedup: float  # chunks/s over the reference's
    prepare_s: float  # load, export or build, first encode
    query_ms: float  # one question alone, mean
    cosine_error_mean: float
    cosine_error_worst: float
    overlap_mean: float  # questions encoded in one batch
    overlap_p10: float
    alone_overlap_mean: float  # each question encoded alone
    alone_overlap_p10: float
    batch_error_worst: float  # a question alone against the same question in the batch

    @property
    def label(self) -> str:
        return self.backend if self.precision == "auto" else f"{self.backend} ({self.precision})"


@dataclass
class Tuning:
    model: str
    key: dict  # what the result depends on (the module doc)
    reference: str
    rows: list[Measured]
    sample: dict  # source, passages, questions
    seconds: float  # how long the measuring took
    created: str
    load_average: str  # uptime's three, when it finished
    skipped: dict[str, str] = field(default_factory=dict)  # backend -> why it was not measured
    path: Path | None = None  # where it is kept (None: it could not be written)
    ran_here: bool = False  # measured by this process (the run then says the tuning ran and how long it took)

    def row(self, backend: str, precision: str = "auto") -> Measured | None:
        return next((r for r in self.rows if r.backend == backend and r.precision == precision), None)

    def to_json(self) -> dict:
        return {"version": TUNING_VERSION, "model": self.model, "key": self.key, "reference": self.reference,
                "rows": [asdict(r) for r in self.rows], "sample": self.sample, "seconds": round(self.seconds, 1),
                "created": self.created, "load_average": self.load_average, "skipped": self.skipped}

    @classmethod
    def from_json(cls, data: dict, path: Path) -> Tuning:
        names = {f.name for f in fields(Measured)}
        rows = [Measured(**{k: v for k, v in r.items() if k in names}) for r in data["rows"]]
        return cls(data["model"], data["key"], data["reference"], rows, data["sample"], float(data["seconds"]),
                   data["created"], data.get("load_average", ""), data.get("skipped", {}), path)


def tuning_key(model: str) -> tuple[str, dict]:
    """The model's short name and what its tuning depends on here (the module doc)."""
    folder = resolve_model_path(model)
    name = model if model in CATALOGUE else (catalogue_name(folder) or folder.name)
    try:
        kbench = metadata.version("kbench")
    except metadata.PackageNotFoundError:
        kbench = "unknown"
    return name, {"model": name, "revision": _revision(folder), "machine": machine(),
                  "runtimes": runtime_versions(), "kbench": kbench, "tuning": TUNING_VERSION,
                  "recipes": {"export": EXPORT_VERSION, "int8": INT8_VERSION, "openvino_int8": INT8_RECIPE}}


def catalogue_name(folder: Path) -> str | None:
    """The catalogue's name of a model folder given by its path: the same weights share one tuning, whichever way
    a config names them."""
    for name, spec in CATALOGUE.items():
        located = spec.locate()
        if located is not None and located.resolve() == folder.resolve():
            return name
    return None


_revisions: dict[tuple, str] = {}


def _revision(folder: Path) -> str:
    """``model_revision`` (it reads every weight file), computed once per process while the folder's files keep
    their sizes and times: a run asks for its tuning a few times (its embedder, fingerprint, params, lines)."""
    files = tuple(sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir() if p.is_file()))
    key = (str(folder), files)
    if key not in _revisions:
        _revisions[key] = model_revision(folder)
    return _revisions[key]


def tuning_path(name: str, key: dict) -> Path:
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)
    return tuning_dir() / f"{safe}-{stable_hash(key, 12)}.json"


_kept: dict[str, Tuning] = {}  # by file: what this process measured or read (a file that could not be written too)


def stored_tuning(model: str) -> Tuning | None:
    """The tuning of ``model`` kept for this machine, or None."""
    name, key = tuning_key(model)
    return _read(tuning_path(name, key), key)


def _read(path: Path, key: dict) -> Tuning | None:
    if str(path) in _kept:
        return _kept[str(path)]
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        tuned = Tuning.from_json(data, path) if data.get("key") == key else None
    except (OSError, ValueError, KeyError, TypeError):  # none yet, or damaged: measured again
        return None
    if tuned is not None:
        _kept[str(path)] = tuned
    return tuned


def tune(model: str, sample: TuningSample | Callable[[], TuningSample], exports: Path, *, force: bool = False,
         backends: Sequence[str] | None = None, say: Callable[[str], None] | None = None) -> Tuning:
    """The tuning of ``model`` here: the kept one, else measured now on ``sample`` (a callable is called only when
    a measurement is needed), kept, and returned. One process measures at a time per model and machine; another
    that asks meanwhile waits and reads its result. ``force``: measure again. ``backends``: only these (tests)."""
    say = say or say_on_stderr
    name, key = tuning_key(model)
    path = tuning_path(name, key)
    if not force and (found := _read(path, key)) is not None:
        return found
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = open(path.with_suffix(".lock"), "a+")
    except OSError as error:  # a models folder that cannot be written: measured for this process only
        say(f"cannot write {path.parent} ({error.strerror or error}): measuring for this process only; set "
            "KBENCH_TUNING_DIR to a folder you can write, so the next one need not measure again")
        tuned = measure(model, sample() if callable(sample) else sample, exports, backends=backends, say=say)
        tuned.model, tuned.key = name, key
        _kept[str(path)] = tuned
        return tuned
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"waiting for another process that is tuning {name} on this machine ({path.with_suffix('.lock')})")
            fcntl.flock(lock, fcntl.LOCK_EX)
            if (found := _read(path, key)) is not None:
                return found
        if not force and (found := _read(path, key)) is not None:
            return found
        tuned = measure(model, sample() if callable(sample) else sample, exports, backends=backends, say=say)
        tuned.model, tuned.key = name, key
        _keep(tuned, path, say)
    return tuned


def _keep(tuned: Tuning, path: Path, say: Callable[[str], None]) -> None:
    """Write ``tuned`` to ``path`` under a temporary name, then rename it into place; a folder that cannot be
    written keeps it for this process only, and says so."""
    tmp = path.with_name(f".partial-{path.name}-{os.getpid()}")
    try:
        tmp.write_text(json.dumps(tuned.to_json(), indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, path)
        tuned.path = path
    except OSError as error:
        say(f"could not keep the tuning in {path.parent} ({error.strerror or error}): this process uses it; set "
            "KBENCH_TUNING_DIR to a folder you can write, so the next one need not measure again")
        tmp.unlink(missing_ok=True)
    _kept[str(path)] = tuned


def say_on_stderr(line: str) -> None:
    """A line of a tuning's on stderr (``kbench: tuning: ...``): what a run says while it measures."""
    print(f"kbench: tuning: {line}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- measuring
def candidates(model: str) -> list[tuple[str, str]]:
    """(backend, precision) pairs to measure: every backend the model runs on, plus OpenVINO at f32 where its own
    precision is not f32 (bf16 on a CPU with bf16 instructions), the reference first."""
    spec = CATALOGUE.get(model)
    backends = list(spec.backends) if spec is not None else list(TRANSFORMER_BACKENDS)
    pairs = [(b, "auto") for b in backends]
    if "openvino" in backends:
        try:
            native = openvino_computes_in("auto")
        except RuntimeMissingError:
            native = "f32"  # skipped later with its one line
        if native != "f32":
            pairs.insert(pairs.index(("openvino", "auto")) + 1, ("openvino", "f32"))
    return pairs


def measure(model: str, sample: TuningSample, exports: Path, *, backends: Sequence[str] | None = None,
            rounds: int = ROUNDS, say: Callable[[str], None] = say_on_stderr) -> Tuning:
    """Time every backend of ``model`` on ``sample`` and measure its drift from the reference (the module doc)."""
    started = time.perf_counter()
    pairs = [p for p in candidates(model) if backends is None or p[0] in backends]
    say(f"measuring {model} on this machine, once ({', '.join(_label(*p) for p in pairs)}: "
        f"{len(sample.passages)} passages and {len(sample.questions)} questions of {sample.source})")
    encoders, prepare_s, skipped = {}, {}, {}
    for backend, precision in pairs:
        t = time.perf_counter()
        try:
            encoder = EMBEDDING_PROVIDERS.get("sentence_transformers").impl(
                EmbeddingConfig(model=model, provider="sentence_transformers", backend=backend, precision=precision),
                exports=exports)
            if getattr(encoder, "needs_calibration", False):
                encoder.calibrate(sample.passages)  # on the sample, as a run calibrates on its chunks
            encoder.encode(sample.passages[:1])  # builds what is built on first use; warms up
        except Exception as error:  # a runtime missing or broken, an export that fails: that backend only
            skipped[_label(backend, precision)] = _one_line(error)
            say(f"{_label(backend, precision)}: skipped: {skipped[_label(backend, precision)]}")
            continue
        encoders[(backend, precision)] = encoder
        prepare_s[(backend, precision)] = time.perf_counter() - t
    if not encoders:
        raise RuntimeMissingError(f"backend tuning: no backend of {model} runs here ({'; '.join(skipped.values())})")
    reference = next(iter(encoders))
    vectors, seconds = {}, {pair: float("inf") for pair in encoders}
    for round_ in range(rounds):  # interleaved: load from other processes falls on every backend alike
        for pair, encoder in encoders.items():
            t = time.perf_counter()
            passages = encoder.encode(sample.passages)
            seconds[pair] = min(seconds[pair], time.perf_counter() - t)
            if round_ == 0:
                batch = encoder.encode(sample.questions)
                t = time.perf_counter()
                alone = np.concatenate([encoder.encode([q], for_queries=True) for q in sample.questions])
                query_ms = 1000 * (time.perf_counter() - t) / len(sample.questions)
                vectors[pair] = (unit_vectors(passages), unit_vectors(batch), unit_vectors(alone), query_ms)
    rows = []
    for pair, encoder in encoders.items():
        runs_in = computes_in(pair[0], encoder.onnx.precision if getattr(encoder, "onnx", None) else "f32")
        rows.append(drift_row(pair, runs_in, vectors[pair], vectors[reference], len(sample.passages) / seconds[pair],
                              len(sample.passages) / seconds[reference], prepare_s[pair]))
    elapsed = time.perf_counter() - started
    say(f"measured {model} in {elapsed:.0f} s")
    return Tuning(model, {}, _label(*reference), rows,
                  {"source": sample.source, "passages": len(sample.passages), "questions": len(sample.questions)},
                  elapsed, datetime.now(timezone.utc).isoformat(timespec="seconds"),
                  " ".join(f"{x:.2f}" for x in os.getloadavg()), skipped, ran_here=True)


def drift_row(pair: tuple[str, str], runs_in: str, mine: tuple, reference: tuple, chunks_per_s: float,
              reference_per_s: float, prepare_s: float) -> Measured:
    """One backend's figures from its vectors (passages, questions in a batch, each alone; unit length) and the
    reference's."""
    passages, batch, alone, query_ms = mine
    ref_passages, ref_batch = reference[0], reference[1]
    errors = np.concatenate([cosine_errors(passages, ref_passages), cosine_errors(batch, ref_batch),
                             cosine_errors(alone, ref_batch)])
    ref_top = top_k(ref_batch, ref_passages)
    in_batch = [rbo(a, b) for a, b in zip(top_k(batch, passages), ref_top)]
    by_itself = [rbo(a, b) for a, b in zip(top_k(alone, passages), ref_top)]
    return Measured(pair[0], pair[1], runs_in, chunks_per_s, chunks_per_s / reference_per_s, prepare_s, query_ms,
                    float(errors.mean()), float(errors.max()), float(np.mean(in_batch)),
                    float(np.quantile(in_batch, 0.1)), float(np.mean(by_itself)), float(np.quantile(by_itself, 0.1)),
                    float(cosine_errors(alone, batch).max()))


def unit_vectors(vectors: np.ndarray) -> np.ndarray:
    """Each row at unit length, in float64 (the drift measures' precision)."""
    v = vectors.astype(np.float64)
    return v / np.clip(np.linalg.norm(v, axis=1, keepdims=True), 1e-12, None)


def cosine_errors(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """1 - cosine per row of two unit-length arrays, never below 0 (rounding)."""
    return np.clip(1.0 - np.sum(a * b, axis=1), 0.0, None)


def top_k(questions: np.ndarray, passages: np.ndarray, k: int = DEPTH) -> list[list[int]]:
    """Each question's top ``k`` passages by cosine, ties in passage order."""
    order = np.argsort(-(questions @ passages.T), axis=1, kind="stable")
    return [list(row[:k]) for row in order]


def rbo(a: Sequence[int], b: Sequence[int], p: float = RBO_P) -> float:
    """Rank-biased overlap of two rankings of equal depth k, extrapolated (Webber, Moffat and Zobel 2010, eq. 32):
    1 for the same items in the same order, 0 for none in common; the top ranks weigh most."""
    k = min(len(a), len(b))
    if k == 0:
        return 1.0
    seen_a, seen_b, common, total = set(), set(), 0, 0.0
    for d in range(1, k + 1):
        x, y = a[d - 1], b[d - 1]
        if x == y:
            common += 1
        else:
            common += (x in seen_b) + (y in seen_a)
        seen_a.add(x)
        seen_b.add(y)
        total += common / d * p ** d
    return common / k * p ** k + (1 - p) / p * total


def _label(backend: str, precision: str) -> str:
    return backend if precision == "auto" else f"{backend} ({precision})"


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text if isinstance(error, RuntimeMissingError) else f"{type(error).__name__}: {text[:300]}"
