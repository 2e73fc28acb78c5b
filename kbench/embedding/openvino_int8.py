"""Static int8 for OpenVINO: NNCF post-training quantization of an exported model, calibrated on real inputs.

Dynamic int8 (onnx-int8) quantizes activations at run time; static int8 fixes their ranges once from a
calibration sample, so OpenVINO runs whole int8 kernels (VNNI on this CPU). Two choices keep the scores
close to fp32, both measured on a SciFact cross-encoder (benchmarks/rerank.py):
- no SmoothQuant: with it, NNCF's transformer preset made the model slower than torch and its scores
  meaningless (max difference 0.92 on a 0-1 scale);
- the feed-forward down-projections (a MatMul fed by the GELU's output, whose activations have the widest
  outliers) of the first third of the layers stay in floating point. All six of MiniLM's in int8: max score
  difference 0.32 and nDCG@10 -0.023; all six in floating point: 0.15 and -0.003 at 11% less speed; only
  layers 0-1 (this rule): 0.18 and -0.0015; only layers 3-5: 0.32, as bad as none. The outliers that matter
  are in the early layers. On an idle machine (benchmarks/rerank.py): 3.50x torch, nDCG@10 +0.0001 on 20
  claims; 3.46x, -0.0060 on 100 (the first half of the layers instead: 3.09x, +0.0072; all six: 3.01x,
  -0.0017). Near-tied candidates swap places under any int8 recipe, so nDCG moves by a few thousandths: on all
  300 test claims this recipe gives -0.0050, 95% interval [-0.0117, +0.0011], at 2.99x; with the reranker
  trained for 3 epochs (it ranks above BM25, the one-epoch one below), -0.0002 [-0.0095, +0.0088] at 3.11x.
  Over those claims the mean score difference to fp32 stayed 0.011-0.016 with every variant tried (the pooler
  and classifier, the attention projections, the FFN inputs, or whole layers 0-1 in floating point; 48
  calibration queries; full bias correction; the MINMAX range estimator; SmoothQuant at 0.15-0.5; a quantile
  range estimator was far worse, 0.23): per-tensor int8 activations spread their error over every layer, no
  single group carries it. Nor did OpenVINO's dynamic quantization of int8-compressed weights do better here
  (100 claims: per-channel int8 weights alone 0.0049 at 253 ms; with activations quantized per token in
  groups of 128 channels 0.0092 at 168 ms, against this recipe's 0.0123 at 171 ms and bf16's 0.0014 at 220 ms).
The parts left in floating point run at ``precision`` (OpenVINO's default here is bf16; see onnx_runtime.py).
The result is a folder (model.xml + model.bin) built under a temporary name and renamed into place, so a
process killed mid-build leaves nothing a later run would load.
"""
from __future__ import annotations

import contextlib
import io
import logging
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from kbench.embedding.runtimes import runtime

MODEL_FILE = "model.xml"
# Bump it whenever the quantization recipe changes: the built model's cache key includes it, so a model built
# by an older recipe is never loaded. 2: only the first third of the FFN outputs in floating point.
INT8_RECIPE = 2


def early_ffn_down_projections(model) -> list[str]:
    """Names of the FFN output MatMuls (data input a Multiply, the erf GELU's last step, or a Gelu) of the
    first third of the layers, in graph order."""
    names = []
    for op in model.get_ops():
        if op.get_type_name() != "MatMul":
            continue
        sources = [op.input_value(i).get_node().get_type_name() for i in range(2)]
        if sources[0] in ("Multiply", "Gelu") and sources[1] in ("Constant", "Convert"):
            names.append(op.get_friendly_name())
    return names[: -(-len(names) // 3)]


def calibrated_int8(fp32: Path, target: Path, feeds: list[dict[str, np.ndarray]], stage: str = "rerank") -> Path:
    """``target``/model.xml: ``fp32`` (ONNX) quantized to static int8 with ``feeds`` as calibration batches
    (``stage``: whose backend it is, for the message when OpenVINO or NNCF is missing)."""
    model_file = target / MODEL_FILE
    if model_file.is_file():
        return model_file
    if not feeds:
        raise ValueError("openvino-int8: no calibration input (the corpus has no text to calibrate on)")
    ov = runtime("openvino", "openvino-int8", stage)
    nncf = runtime("nncf", "openvino-int8", stage)

    model = ov.Core().read_model(str(fp32))
    inputs = [i.get_any_name() for i in model.inputs]
    dataset = nncf.Dataset(feeds, lambda feed: {k: v for k, v in feed.items() if k in inputs})
    no_smooth_quant = nncf.AdvancedSmoothQuantParameters(matmul=-1)
    nncf_log = logging.getLogger("nncf")
    level = nncf_log.level
    nncf_log.setLevel(logging.ERROR)  # one INFO line per node left in floating point
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # NNCF's progress bars: a one-time build, not the run's
            quantized = nncf.quantize(
                model, dataset, model_type=nncf.ModelType.TRANSFORMER, subset_size=len(feeds),
                ignored_scope=nncf.IgnoredScope(names=early_ffn_down_projections(model), validate=False),
                advanced_parameters=nncf.AdvancedQuantizationParameters(smooth_quant_alphas=no_smooth_quant))
    finally:
        nncf_log.setLevel(level)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".partial-{target.name}-", dir=target.parent))
    try:
        ov.save_model(quantized, str(tmp / MODEL_FILE))
        try:
            os.rename(tmp, target)
        except OSError:  # another process finished the same build first: keep theirs
            if not model_file.is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return model_file
