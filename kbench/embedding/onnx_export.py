"""Export a local transformer folder to ONNX once, and quantize it to dynamic int8, cached under ``exports_dir()``
(the models directory given by KBENCH_MODELS_DIR, else the run's workspace cache: kbench/paths.py).

The export is direct (``torch.onnx.export`` of the Hugging Face model, no optimum), so it needs only torch
and onnxruntime, both offline. Files are written under a temporary name in the target folder and renamed
into place: a process killed mid-export leaves no half-written model that a later run would load.
"""
from __future__ import annotations

import logging
import os
import tempfile
import warnings
from pathlib import Path

from kbench.embedding.runtimes import runtime
from kbench.paths import exports_dir

ONNX_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
# MatMul only, per channel: quantizing the embedding Gather too costs far more accuracy than it saves time
INT8_OPS = ["MatMul"]
# A bi-encoder's int8 weights (backend onnx-int8) are kept within [-64, 64] (reduce_range), so every x86 CPU computes
# the same integers. ONNX Runtime's int8 kernel for a CPU without VNNI (AVX2, and AVX-512 before Cascade Lake) adds
# each pair of uint8 x int8 products in 16 bits and saturates (vpmaddubsw; the quantizer's own advice for such
# CPUs is reduce_range). With 8-bit weights a pair reaches 2 x 255 x 127 = 64,770 and is cut to 32,767: on an
# AVX2-only EPYC MiniLM's doc nDCG@10 on the demo set fell 0.0142 below torch's where a VNNI CPU, which adds in
# 32 bits, lost 0.0015 on the same batches. With 7-bit weights a pair stays within 2 x 255 x 64 = 32,640.
# The cross-encoder's onnx-int8 (scorer-int8.onnx) keeps 8-bit weights, as measured in benchmarks/rerank.py.
SEVEN_BIT_HEADS = ("base",)
# 2: 7-bit weights (SEVEN_BIT_HEADS). In the file's name and the bi-encoder's vector cache key, so vectors of the
# 8-bit file (model-int8.onnx) are never served to a run of the 7-bit one.
INT8_VERSION = 2
# 2: attention exported in its eager form (MatMul, Softmax) instead of torch's fused SDPA call, which OpenVINO
# and ONNX Runtime fuse again into their own attention kernels (OpenVINO 1.2x faster on MiniLM here).
# Bump it whenever the export changes: old files are then never loaded, and vector caches are keyed by it.
EXPORT_VERSION = 2


def export_dir(model_key: str, revision: str, root: Path | None = None) -> Path:
    """Where the exports of one model version live: <root>/<model>-<revision>-v<N>/ (root: ``exports_dir()``)."""
    return (root or exports_dir()) / f"{model_key}-{revision}-v{EXPORT_VERSION}"


def _atomic_build(target: Path, build) -> Path:
    """Run ``build(tmp_path)`` and rename its output to ``target``; nothing half-written is ever visible."""
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".partial-{target.stem}-", suffix=".onnx", dir=target.parent)
    os.close(fd)
    try:
        build(Path(tmp))
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


# head -> (file stem, transformers auto class, the output exported)
HEADS = {
    "base": ("model", "AutoModel", "last_hidden_state"),  # bi-encoders: token vectors, pooled in numpy
    "sequence_classification": ("scorer", "AutoModelForSequenceClassification", "logits"),  # cross-encoders
}


def _export_fp32(folder: Path, out: Path, head: str) -> None:
    import torch
    import transformers

    _, auto_class, output = HEADS[head]
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    model = getattr(transformers, auto_class).from_pretrained(str(folder), local_files_only=True,
                                                              attn_implementation="eager").eval()
    sample = tokenizer(["an example sentence", "a second, somewhat longer example sentence"],
                       ["and its pair", "with a pair as well"], padding=True, return_tensors="pt")
    names = [n for n in ONNX_INPUTS if n in sample]

    class NamedOutput(torch.nn.Module):
        """Keyword arguments by name: positional order differs between transformers versions."""

        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *tensors):
            return getattr(self.inner(**dict(zip(names, tensors))), output)

    dynamic = {n: {0: "batch", 1: "sequence"} for n in names}
    dynamic[output] = {0: "batch", 1: "sequence"} if head == "base" else {0: "batch"}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer notes about Python conditions; outputs are checked in tests
        torch.onnx.export(NamedOutput(model), tuple(sample[n] for n in names), str(out),
                          input_names=names, output_names=[output], dynamic_axes=dynamic,
                          opset_version=17, dynamo=False)


def exported_model(folder: Path, model_key: str, revision: str, int8: bool, head: str = "base",
                   root: Path | None = None) -> Path:
    """The fp32 (or int8) ONNX file of the transformer in ``folder`` with ``head``, exported on first use under
    ``root`` (default ``exports_dir()``)."""
    where = export_dir(model_key, revision, root)
    stem = HEADS[head][0]
    fp32 = _atomic_build(where / f"{stem}.onnx", lambda tmp: _export_fp32(folder, tmp, head))
    if not int8:
        return fp32
    if head in SEVEN_BIT_HEADS:
        return quantized_int8(fp32, where / f"{stem}-int8-v{INT8_VERSION}.onnx", seven_bit_weights=True)
    return quantized_int8(fp32, where / f"{stem}-int8.onnx", stage="rerank")


def quantized_int8(fp32: Path, target: Path, seven_bit_weights: bool = False, stage: str = "embedding") -> Path:
    """Dynamic int8 quantization of ``fp32`` (weights int8 per channel, activations quantized at run time);
    ``seven_bit_weights``: within [-64, 64], the same integers on every CPU (SEVEN_BIT_HEADS)."""
    def build(tmp: Path) -> None:
        quantization = runtime("onnxruntime.quantization", "onnx-int8", stage)
        root = logging.getLogger()
        level = root.level
        root.setLevel(logging.ERROR)  # quantize_dynamic logs a pre-processing hint on the root logger
        try:
            quantization.quantize_dynamic(str(fp32), str(tmp), weight_type=quantization.QuantType.QInt8,
                                          per_channel=True, reduce_range=seven_bit_weights,
                                          op_types_to_quantize=INT8_OPS)
        finally:
            root.setLevel(level)

    return _atomic_build(target, build)
