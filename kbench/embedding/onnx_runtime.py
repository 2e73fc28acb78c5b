"""Run a transformer exported to ONNX: ONNX Runtime or OpenVINO, length-sorted batches, pooling in numpy.

Texts are tokenized once, sorted by token count and cut into batches, so each batch pads only to its own
longest text; vectors come back in the caller's order. Pooling (mean or CLS, then the model's Normalize
module if it has one) follows the sentence-transformers folder's own config, so the vectors match torch.
Batch encoding and query encoding may use different thread counts (a one-query call on many threads
spends more time waking them than computing).

OpenVINO computes in bf16, not f32, by default on a CPU with bf16 instructions (avx512_bf16; this machine's Xeon
has them, and AMX): 1.9x faster than f32 here, with cross-encoder scores 0.02 from torch's at most. ``precision``
asks for one (``auto`` keeps the runtime's choice); ``runner.precision`` says which one runs.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kbench.embedding.config import Precision  # noqa: F401 (annotations here; cross_encoder.py reads it here too)
from kbench.embedding.runtimes import runtime


@dataclass(frozen=True)
class Pooling:
    mode: str  # "mean" | "cls"
    normalize: bool  # the folder ends with a Normalize module

    @classmethod
    def of_folder(cls, folder: Path) -> Pooling:
        """Read a sentence-transformers folder's modules.json and 1_Pooling/config.json."""
        modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
        normalize = any(m["type"].endswith("Normalize") for m in modules)
        pooling = next((m for m in modules if m["type"].endswith("Pooling")), None)
        mode = "mean"
        if pooling is not None:
            config = json.loads((folder / pooling["path"] / "config.json").read_text(encoding="utf-8"))
            if config.get("pooling_mode_cls_token"):
                mode = "cls"
            elif not config.get("pooling_mode_mean_tokens", True):
                raise ValueError(f"{folder}: only mean and CLS pooling run on ONNX here; use embedding.backend=torch")
        return cls(mode, normalize)

    def __call__(self, hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
        if self.mode == "cls":
            vectors = hidden[:, 0]
        else:
            weights = mask[..., None].astype(hidden.dtype)
            vectors = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        if self.normalize:
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            vectors = vectors / np.clip(norms, 1e-12, None)
        return vectors.astype(np.float32, copy=False)


def onnx_device_providers(device: str, backend: str = "onnx", stage: str = "embedding") -> list[str]:
    ort = runtime("onnxruntime", backend, stage)
    available = ort.get_available_providers()
    if device in ("auto", "cuda") and "CUDAExecutionProvider" in available:
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    if device == "cuda":
        raise ValueError("embedding.device: cuda, but this onnxruntime has no CUDAExecutionProvider; install "
                         "onnxruntime-gpu on a machine with a GPU, or set embedding.device=cpu")
    return ["CPUExecutionProvider"]


def openvino_computes_in(precision: Precision) -> str:
    """The float precision OpenVINO's CPU plugin computes in when asked for ``precision``, known without
    compiling a model: auto is the plugin's default for this CPU, and bf16 on a CPU without bf16
    instructions is f32. The same value a compiled model reports (``_OpenVinoRunner.precision``)."""
    core = runtime("openvino", "openvino").Core()
    if precision == "auto":
        return core.get_property("CPU", "INFERENCE_PRECISION_HINT").get_type_name()
    if precision == "bf16" and "BF16" not in core.get_property("CPU", "OPTIMIZATION_CAPABILITIES"):
        return "f32"
    return precision


def computes_in(backend: str, float_precision: str) -> str:
    """What a backend computes in, as benchmarks, fingerprints and the ``kbench.computes_in`` tag say it:
    ``float_precision`` ("f32", "bf16"), behind "int8/" for an int8 backend (its float parts)."""
    return f"int8/{float_precision}" if backend.endswith("int8") else float_precision


class _OrtRunner:
    precision = "f32"  # ONNX Runtime on CPU computes the file's own float32 (int8 files: int8 MatMuls)

    def __init__(self, path: Path, threads: int | None, device: str, output_rank: int = 3,
                 precision: Precision = "auto", backend: str = "onnx", stage: str = "embedding"):
        ort = runtime("onnxruntime", backend, stage)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if threads:
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(path), options, providers=onnx_device_providers(device, backend, stage))
        self.inputs = [i.name for i in self.session.get_inputs()]
        outputs = [o.name for o in self.session.get_outputs() if len(o.shape) == output_rank]
        if not outputs:
            raise ValueError(f"{path}: no output of rank {output_rank} (3: token vectors, 2: logits)")
        self.output = outputs[0]

    def __call__(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        return self.session.run([self.output], {k: v for k, v in feeds.items() if k in self.inputs})[0]


class _OpenVinoRunner:
    def __init__(self, path: Path, threads: int | None, device: str, output_rank: int = 3,
                 precision: Precision = "auto", backend: str = "openvino", stage: str = "embedding"):
        ov = runtime("openvino", backend, stage)
        if device == "cuda":
            raise ValueError("embedding.device: cuda does not apply to embedding.backend=openvino (CPU here); "
                             "use embedding.backend=onnx on a CUDA machine")
        config = {"INFERENCE_NUM_THREADS": threads} if threads else {}
        if precision != "auto":
            config["INFERENCE_PRECISION_HINT"] = precision
        model = ov.Core().read_model(str(path))
        self.inputs = [i.get_any_name() for i in model.inputs]
        outputs = [o for o in model.outputs if o.get_partial_shape().rank.get_length() == output_rank]
        if not outputs:
            raise ValueError(f"{path}: no output of rank {output_rank} (3: token vectors, 2: logits)")
        self.output = outputs[0].get_any_name()
        self.compiled = ov.Core().compile_model(model, "CPU", config)
        # what runs, which on a CPU without bf16 instructions is f32 even when bf16 was asked for
        self.precision = self.compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name()

    def __call__(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        result = self.compiled({k: v for k, v in feeds.items() if k in self.inputs})
        return result[self.compiled.output(self.output)]


RUNNERS = {"onnx": _OrtRunner, "onnx-int8": _OrtRunner, "openvino": _OpenVinoRunner}


# A run of non-space characters from its first ASCII letter or digit to its end. Each such run yields at least
# one WordPiece token (the letter or digit survives BERT's normalizer), and distinct runs yield distinct tokens.
_WORD_WITH_ASCII_ALNUM = re.compile(r"[A-Za-z0-9][^ \t\n\r]*")


def _is_bert_wordpiece(spec: dict) -> bool:
    return ((spec.get("normalizer") or {}).get("type") == "BertNormalizer"
            and (spec.get("pre_tokenizer") or {}).get("type") == "BertPreTokenizer"
            and (spec.get("model") or {}).get("type") == "WordPiece")


def text_prefix_with_tokens(text: str, tokens: int) -> str:
    """The shortest prefix of ``text``, cut on whitespace, that surely holds ``tokens`` BERT WordPiece tokens
    (``text`` itself when it is shorter). BERT's normalizer works per character and its pre-tokenizer splits
    on the whitespace the cut falls on, so the prefix's tokens are the whole text's first tokens."""
    for count, word in enumerate(_WORD_WITH_ASCII_ALNUM.finditer(text), start=1):
        if count == tokens:
            return text[: word.end()]
    return text


class TruncatingTokenizer:
    """A fast tokenizer that truncates (longest first, as transformers does for pairs) and never pads.

    A BERT WordPiece tokenizer reads a long text only as far as truncation can keep: a single text up to the
    prefix that surely holds ``max_length`` tokens; the second text of a pair up to the prefix that surely
    holds ``max_length`` tokens, plus the first text's count when that is over half the budget. Longest-first
    truncation keeps the shorter side whole or cuts both to halves, the longer side taking the odd token, so
    it depends on the second text's length only up to that bound: the encodings are identical to the whole
    texts' (tests/embedding/test_truncating_tokenizer.py). Tokenizing 25 whole (claim, SciFact abstract)
    pairs to keep 128 tokens took 15.1 ms here, their prefixes 9.3 ms. Other tokenizers (byte-level BPE,
    SentencePiece) read the whole text."""

    def __init__(self, tokenizer_file: Path, max_length: int):
        from tokenizers import Tokenizer

        spec = Path(tokenizer_file).read_text(encoding="utf-8")
        self.tokenizer = Tokenizer.from_str(spec)
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length)
        self.max_length = max_length
        self.reads_prefixes = _is_bert_wordpiece(json.loads(spec))
        if self.reads_prefixes:
            self._counter = Tokenizer.from_str(spec)  # untruncated, for the first texts' lengths
            self._counter.no_truncation()
            self._counter.no_padding()

    def _pair_prefixes(self, pairs: list) -> list:
        first_tokens: dict[str, int] = {}
        cut = []
        for first, second in pairs:
            if first not in first_tokens:  # a reranker's pairs share one query: counted once
                first_tokens[first] = len(self._counter.encode(first, add_special_tokens=False).ids)
            n_first = first_tokens[first]
            # A first text within half the budget (less up to 4 special tokens) is kept whole whatever the
            # second's length; a longer one needs the second's prefix to stay the longer side.
            needed = self.max_length + (0 if 2 * n_first <= self.max_length - 4 else n_first)
            cut.append((first, text_prefix_with_tokens(second, needed)))
        return cut

    def encode_batch(self, inputs: list) -> list:
        """Texts, or (first, second) pairs -> tokenizers Encodings, in order."""
        if self.reads_prefixes and inputs:
            if all(isinstance(x, str) for x in inputs):
                inputs = [text_prefix_with_tokens(x, self.max_length) for x in inputs]
            elif not any(isinstance(x, str) for x in inputs):
                inputs = self._pair_prefixes(inputs)
        return self.tokenizer.encode_batch(inputs)


def load_tokenizer(tokenizer_file: Path, max_length: int) -> TruncatingTokenizer:
    """The tokenizer the ONNX runners feed from (see ``TruncatingTokenizer``)."""
    return TruncatingTokenizer(tokenizer_file, max_length)


def length_sorted_batches(encodings, batch_size: int, pad_id: int):
    """(rows, feeds) per batch, longest texts first; each batch is padded to its own longest text only."""
    order = np.argsort([-len(e.ids) for e in encodings], kind="stable")
    for start in range(0, len(order), batch_size):
        rows = order[start : start + batch_size]
        width = max(len(encodings[r].ids) for r in rows)
        ids = np.full((len(rows), width), pad_id, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        types = np.zeros((len(rows), width), dtype=np.int64)
        for i, r in enumerate(rows):
            e = encodings[r]
            n = len(e.ids)
            ids[i, :n], mask[i, :n], types[i, :n] = e.ids, e.attention_mask, e.type_ids
        yield rows, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


class OnnxEncoder:
    """texts -> pooled vectors through an ONNX file; ``encode(texts, batch_size, for_queries)``."""

    def __init__(self, onnx_path: Path, tokenizer_file: Path, pooling: Pooling, max_length: int, pad_id: int,
                 backend: str, device: str = "auto", threads: int | None = None, query_threads: int | None = None,
                 precision: Precision = "auto"):
        self.tokenizer = load_tokenizer(tokenizer_file, max_length)
        self.pooling, self.pad_id, self.max_length = pooling, pad_id, max_length
        runner = RUNNERS["openvino" if backend == "openvino-int8" else backend]  # a calibrated int8 model: OpenVINO
        self._make = lambda n: runner(onnx_path, n, device, precision=precision, backend=backend)
        self._threads, self._query_threads = threads, query_threads
        self._runners: dict[int | None, object] = {}
        self.precision = self._runner(threads).precision  # load now: a bad device or file fails before any work

    def _runner(self, threads: int | None):
        if threads not in self._runners:
            self._runners[threads] = self._make(threads)
        return self._runners[threads]

    def encode(self, texts: list[str], batch_size: int, for_queries: bool = False) -> np.ndarray:
        runner = self._runner(self._query_threads if for_queries else self._threads)
        out: np.ndarray | None = None
        for rows, feeds in length_sorted_batches(self.tokenizer.encode_batch(list(texts)), batch_size, self.pad_id):
            pooled = self.pooling(runner(feeds), feeds["attention_mask"])
            if out is None:
                out = np.zeros((len(texts), pooled.shape[1]), dtype=np.float32)
            out[rows] = pooled
        return out if out is not None else np.zeros((0, 0), dtype=np.float32)


class OnnxPairScorer:
    """(query, passage) pairs -> one score each through an exported sequence-classification model (a
    cross-encoder), in length-sorted batches; ``activation`` as the sentence-transformers folder says."""

    def __init__(self, onnx_path: Path, tokenizer_file: Path, max_length: int, pad_id: int, backend: str,
                 activation: str | None, device: str = "auto", threads: int | None = None,
                 precision: Precision = "auto"):
        self.tokenizer = load_tokenizer(tokenizer_file, max_length)
        self.runner = RUNNERS["openvino" if backend == "openvino-int8" else backend](
            onnx_path, threads, device, output_rank=2, precision=precision, backend=backend, stage="rerank")
        self.precision = self.runner.precision
        self.pad_id, self.activation = pad_id, activation

    def score(self, pairs: list[tuple[str, str]], batch_size: int) -> np.ndarray:
        scores = np.zeros(len(pairs), dtype=np.float32)
        for rows, feeds in length_sorted_batches(self.tokenizer.encode_batch(list(pairs)), batch_size, self.pad_id):
            scores[rows] = self.runner(feeds)[:, 0]
        if self.activation == "sigmoid":
            scores = 1 / (1 + np.exp(-scores))
        return scores
