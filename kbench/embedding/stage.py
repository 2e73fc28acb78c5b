"""Embed texts through the content-addressed cache; report hits, misses and failures."""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kbench.cache import EmbeddingCache
from kbench.embedding.choice import resolved
from kbench.embedding.config import CHOICES, LOCAL_PROVIDERS, EmbeddingConfig
from kbench.embedding.models import CATALOGUE
from kbench.embedding.onnx_export import EXPORT_VERSION, INT8_VERSION
from kbench.embedding.onnx_runtime import computes_in, openvino_computes_in
from kbench.embedding.registry import EMBEDDING_PROVIDERS, Encoder, ReportingEncoder
from kbench.embedding.tuning import TuningSample, tuning_exports
from kbench.hashing import sha256_text
from kbench.llm import stop_error
from kbench.progress import Progress
from kbench.paths import exports_dir


# Encoders this process loaded, newest last: a sweep's configs, a notebook's runs and the tests load the same model
# again and again, and a load costs seconds (MiniLM on torch: about 4 s) where encoding cached texts costs nothing.
LOADED_ENCODERS = 2
_loaded: OrderedDict[str, Encoder] = OrderedDict()
_loaded_lock = threading.Lock()


def load_encoder(config: EmbeddingConfig, exports: Path | None = None) -> Encoder:
    """The encoder of ``embedding.provider`` for ``embedding.model`` (loads the model) on the backend the config
    names or, for ``exact`` and ``fast``, the one chosen on this machine (kbench/embedding/choice.py: tuned first if
    need be); ``exports``: where a backend may write the models it derives (default ``exports_dir()``). The last
    ``LOADED_ENCODERS`` local encoders are kept and handed out again for the same settings (``reusable``)."""
    if exports is None and config.backend in CHOICES:  # where the tuning built them (the default folder, or
        exports = tuning_exports()                       # beside KBENCH_TUNING_DIR)
    config = resolved(config, exports=exports)
    if not reusable(config):
        return EMBEDDING_PROVIDERS.get(config.provider).impl(config, exports=exports)
    key = f"{config.model_dump_json()}|{exports}"
    with _loaded_lock:
        if key in _loaded:
            _loaded.move_to_end(key)
            return _loaded[key]
    encoder = EMBEDDING_PROVIDERS.get(config.provider).impl(config, exports=exports)
    with _loaded_lock:
        _loaded[key] = encoder
        while len(_loaded) > LOADED_ENCODERS:
            _loaded.popitem(last=False)
    return encoder


def reusable(config: EmbeddingConfig) -> bool:
    """An encoder that is the same whoever asks: a model in this process (not an API provider, whose client
    holds a connection and a key), and not openvino-int8, which is calibrated on the first run's corpus and keeps
    that calibration (a second run would get vectors calibrated on someone else's chunks)."""
    return config.provider in LOCAL_PROVIDERS and config.backend != "openvino-int8"


def forget_loaded_encoders() -> None:
    """Drop the kept encoders (a test that counts loads, or a model folder rewritten in place)."""
    with _loaded_lock:
        _loaded.clear()


def embedding_computes_in(config: EmbeddingConfig) -> str | None:
    """What the encoder computes in on this machine, as fingerprints and the ``kbench.computes_in`` tag say it:
    f32 (torch, onnx, static models), int8/f32 (onnx-int8), OpenVINO's float precision (openvino), int8/<that>
    (openvino-int8); None for an API (its service decides). ``exact`` and ``fast``: of the backend chosen here."""
    config = resolved(config)
    if config.provider == "sentence_transformers":
        floats = openvino_computes_in(config.precision) if config.backend.startswith("openvino") else "f32"
        return computes_in(config.backend, floats)
    if config.provider == "static":
        return "f32"
    return None


def l2_normalize(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


@dataclass
class EmbeddingResult:
    vectors: np.ndarray  # (n, dim) float32; rows of failed texts are zeros and must not be indexed
    failed: dict[int, str] = field(default_factory=dict)  # row -> reason
    cache_hits: int = 0
    cache_misses: int = 0

    @property
    def ok_mask(self) -> np.ndarray:
        mask = np.ones(len(self.vectors), dtype=bool)
        mask[list(self.failed)] = False
        return mask


def _result_changing_knobs(config: EmbeddingConfig) -> dict:
    """Knobs that change the vectors, keyed only when not at their default so older caches stay valid.

    int8 and even fp32 ONNX vectors differ from torch's in the last digits: a run on one backend is never
    served another backend's vectors. OpenVINO is keyed by the precision it computes in on this machine, not
    the one asked for: ``auto`` is bf16 on one CPU and f32 on another, and a workspace may be shared (a Dask
    sweep's workers), while ``auto`` and ``bf16`` on a bf16 CPU compute the same vectors."""
    knobs = {}
    if config.backend != "torch":
        knobs["backend"] = config.backend
        knobs["export"] = EXPORT_VERSION  # a changed export changes the vectors (int8 most)
    if config.backend == "onnx-int8":  # its recipe (7-bit weights since version 2: onnx_export.py)
        knobs["int8"] = INT8_VERSION
    if config.backend == "openvino":
        knobs["computes_in"] = openvino_computes_in(config.precision)
    if config.backend == "openvino-int8":  # and its calibration, added once known (CachedEmbedder._calibrate)
        knobs["computes_in"] = embedding_computes_in(config)
    if config.max_seq_length is not None:
        knobs["max_seq_length"] = config.max_seq_length
    return knobs


class CachedEmbedder:
    """An encoder plus its cache namespace; ``embed(texts)`` computes only texts never seen before.

    ``config.backend`` ``exact`` or ``fast`` runs the backend chosen on this machine (``self.config`` names it; the
    vector cache is keyed by it, so one backend's vectors are never served to another). A machine with no tuning of
    the model tunes it first, on ``sample`` (the run's own corpus; default the demo set's)."""

    CACHE_BLOCK = 512  # texts per encode call and per cache shard

    def __init__(self, config: EmbeddingConfig, cache_root: Path, extra_key: dict | None = None,
                 sample: TuningSample | Callable[[], TuningSample] | None = None):
        self.cache_root = cache_root
        self.config = resolved(config, sample=sample, exports=exports_dir(cache_root))
        self.encoder = load_encoder(self.config, exports=exports_dir(cache_root))
        self.fingerprint = {
            "model": self.encoder.model_key,
            "provider": config.provider,
            "revision": self.encoder.revision,
            "dimension": config.dimension,
            "normalize": config.normalize,
            "document_prefix": config.document_prefix,
            **_result_changing_knobs(self.config),  # the backend that runs, never exact or fast
            **(extra_key or {}),
        }
        self.cache = EmbeddingCache(cache_root, self.fingerprint)

    @property
    def dimension(self) -> int | None:
        return self.encoder.dimension

    def _finish(self, vectors: np.ndarray) -> np.ndarray:
        return l2_normalize(vectors) if self.config.normalize else vectors

    def embed(self, texts: list[str], progress: bool = False, stage: str = "embed") -> EmbeddingResult:
        """Vectors of ``texts`` (cached ones read, the rest computed); ``progress`` shows the texts computed under
        the name ``stage``."""
        return self._embed_prefixed([self.config.document_prefix + t for t in texts], progress, stage)

    @property
    def needs_calibration(self) -> bool:
        return getattr(self.encoder, "needs_calibration", False) and "calibration" not in self.fingerprint

    def calibrate(self, documents: list[str]) -> None:
        """A backend calibrated on the corpus (openvino-int8) calibrates on ``documents`` (the run's chunks:
        ``embed`` calls this with the first texts it embeds; a live store's rows, which are never embedded here,
        call it directly). Its vectors depend on that sample, so the cache namespace gets the calibration's key.
        Once: later calls change nothing."""
        self._calibrate([self.config.document_prefix + t for t in documents])

    def _calibrate(self, prefixed: list[str]) -> None:
        if self.needs_calibration:
            self.fingerprint = {**self.fingerprint, "calibration": self.encoder.calibrate(prefixed)}
            self.cache = EmbeddingCache(self.cache_root, self.fingerprint)

    def _embed_prefixed(self, prefixed: list[str], progress: bool = False, stage: str = "embed") -> EmbeddingResult:
        self._calibrate(prefixed)
        hashes = [sha256_text(t) for t in prefixed]
        found = self.cache.get_many(hashes)
        todo: dict[str, str] = {}
        for h, t in zip(hashes, prefixed):
            if h not in found and h not in todo:
                todo[h] = t
        failed_hashes: dict[str, str] = {}
        # longest first: each block, and each batch inside it, then pads to texts of about the same length
        pending = sorted(todo.items(), key=lambda item: -len(item[1]))
        # the first batch (the longest texts) is timed for the stage's estimate: by characters, up to what the
        # model reads, so the longest batch first does not overstate the rest (kbench/progress.py)
        cost = self._cost
        with Progress(stage, len(pending), "texts", enabled=progress and bool(pending),
                      work=sum(cost(t) for _, t in pending)) as bar:
            for start in range(0, len(pending), self.CACHE_BLOCK):
                # one cache shard per block: a run killed mid-way keeps what it already embedded
                block = pending[start : start + self.CACHE_BLOCK]
                keys = [k for k, _ in block]
                if isinstance(self.encoder, ReportingEncoder):  # an API: successes and failures apart
                    report = self.encoder.encode_report([t for _, t in block])
                    failed_hashes.update({keys[f.index]: f.error for f in report.failed_items})
                    if report.embeddings:
                        ok = [keys[i] for i in report.indices]
                        vectors = self._finish(np.stack(report.embeddings).astype(np.float32))
                        self.cache.put_many(ok, vectors)
                        found.update(zip(ok, vectors))
                    bar.advance(len(block), work=sum(cost(t) for _, t in block))
                    if report.stopped is not None:  # quota or endpoint gone: stop now, what finished is cached
                        raise stop_error("embedding", report.stopped, len(found), len(hashes))
                    continue
                computed = self._encode_block([t for _, t in block], keys, failed_hashes, bar)
                if computed is None:
                    continue
                bad = ~np.isfinite(computed).all(axis=1) | (np.abs(computed).sum(axis=1) == 0)
                good_keys = [k for k, b in zip(keys, bad) if not b]
                failed_hashes.update({k: "zero or non-finite vector" for k, b in zip(keys, bad) if b})
                self.cache.put_many(good_keys, computed[~bad])
                found.update({k: v for k, v, b in zip(keys, computed, bad) if not b})
        dim = next(iter(found.values())).shape[0] if found else (self.dimension or 1)
        vectors = np.zeros((len(prefixed), dim), dtype=np.float32)
        failed: dict[int, str] = {}
        for row, h in enumerate(hashes):
            if h in found:
                vectors[row] = found[h]
            else:
                failed[row] = failed_hashes.get(h, "not embedded")
        return EmbeddingResult(vectors, failed, cache_hits=len(set(hashes)) - len(todo), cache_misses=len(todo))

    def _encode_block(self, texts: list[str], keys: list[str], failed: dict[str, str],
                      bar: Progress) -> np.ndarray | None:
        """One block's vectors, encoded a batch at a time so the stage's progress moves with each batch (the
        encoders' own bars stay off); a batch that raises fails the whole block, recorded, never a zero vector."""
        size = self.config.batch_size
        parts = []
        try:
            for start in range(0, len(texts), size):
                parts.append(self.encoder.encode(texts[start : start + size]))
                bar.advance(len(parts[-1]), work=sum(self._cost(t) for t in texts[start : start + size]))
        except Exception as e:  # keep going: record failures, never store a zero vector
            failed.update({k: f"{type(e).__name__}: {e}" for k in keys})
            done = sum(len(p) for p in parts)
            bar.advance(len(texts) - done, work=sum(self._cost(t) for t in texts[done:]))
            return None
        return self._finish(np.concatenate(parts)) if parts else None

    def _cost(self, text: str) -> int:
        """What embedding ``text`` costs, for the progress estimate: its characters, up to about what the model reads
        (its max tokens at ~5 characters each; a static model reads everything, cheaply)."""
        spec = CATALOGUE.get(self.config.model)
        limit = spec.max_tokens * 5 if spec is not None and spec.max_tokens else 0
        return min(len(text), limit) if limit else len(text)

    def time_queries(self, texts: list[str]) -> float | None:
        """Seconds per question of encoding ``texts`` together with the encoder itself, never read from the vector
        cache, after one untimed warm-up question: what a batch of questions costs to encode, measured the same way
        for every config of a sweep whether or not an earlier config cached their vectors (``embed_queries`` of a
        batch may). None for an API encoder: its queries never go through the cache, so its own call is timed as
        it is (and timing it again would send the questions twice)."""
        if not texts or isinstance(self.encoder, ReportingEncoder) or self.needs_calibration:
            return None
        prefixed = [self.config.query_prefix + t for t in texts]
        self.encoder.encode(prefixed[:1], for_queries=True)  # warm-up, untimed: a model's first call is slower
        size = self.config.batch_size
        started = time.perf_counter()
        for start in range(0, len(prefixed), size):  # batched as the cache path batches them
            self._finish(self.encoder.encode(prefixed[start:start + size]))
        return (time.perf_counter() - started) / len(prefixed)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        """One query is always encoded: it is the latency path (``embedding.query_threads``), and an ad-hoc
        question is never cached. A batch of queries (an evaluation set, embedded at once under
        ``retrieval.latency: batch`` or for the index recall check) goes through the vector cache like
        chunks: the 12 configs of a sweep then embed their 300 queries once, not 12 times. API encoders
        are never asked for queries through the cache (a failed query must fail the run, not be a zero row)."""
        prefixed = [self.config.query_prefix + t for t in texts]
        if self.needs_calibration:  # a caller's bug, not a user's: every caller embeds or calibrates first
            raise RuntimeError(f"embedding.backend {self.config.backend} calibrates on the corpus: embed the corpus "
                               "(or call calibrate) before the queries")
        if len(prefixed) < 2 or isinstance(self.encoder, ReportingEncoder):
            return self._finish(self.encoder.encode(prefixed, for_queries=len(prefixed) == 1))
        result = self._embed_prefixed(prefixed)
        if result.failed:
            row, reason = next(iter(result.failed.items()))
            raise RuntimeError(f"query {row} of {len(texts)} could not be embedded: {reason}")
        return result.vectors
