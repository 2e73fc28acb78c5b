"""cross_encoder on ONNX: torch and the ONNX backends must score real demo (question, passage) pairs alike.

The model is all-MiniLM-L6-v2 with a fresh one-logit head from a fixed seed, saved as a CrossEncoder
folder: its scores mean nothing for relevance, but torch and ONNX must still agree on every one of them,
which is what this checks (a trained reranker takes minutes to make; the rerank benchmark uses one)."""
from __future__ import annotations

import numpy as np
import pytest

from kbench import ChunkingConfig, DatasetConfig, chunked_corpus
from kbench.config import ConfigError, load_experiment
from kbench.embedding.models import resolve_model_path
from kbench.retrieval.rerank.cross_encoder import (CrossEncoderParams, calibration_pairs, onnx_pair_scorer,
                                                  resolve_cross_encoder)


@pytest.fixture(scope="module")
def seeded_cross_encoder(tmp_path_factory):
    import torch
    from sentence_transformers import CrossEncoder

    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("ce") / "seeded-minilm-ce"
    CrossEncoder(str(resolve_model_path("all-MiniLM-L6-v2")), num_labels=1, max_length=256, device="cpu").save(
        str(folder))
    return folder


@pytest.fixture(scope="module")
def pairs():
    dataset, chunks = chunked_corpus(DatasetConfig(name="demo", max_queries=2),
                                     ChunkingConfig(strategy="fixed", chunk_size=600, chunk_overlap=100))
    return [(q.text, c.text) for q in dataset.queries for c in chunks[:12]]


def test_onnx_backends_score_as_torch_does(seeded_cross_encoder, pairs, monkeypatch, tmp_path):
    from sentence_transformers import CrossEncoder

    monkeypatch.setenv("KBENCH_MODELS_DIR", str(tmp_path))  # the export is cached under models_dir()/exported
    folder = resolve_cross_encoder(str(seeded_cross_encoder))
    torch_scores = CrossEncoder(str(folder), device="cpu", local_files_only=True).predict(
        [list(p) for p in pairs], show_progress_bar=False)
    for backend, precision, tolerance in (("onnx", "auto", 1e-5), ("openvino", "f32", 1e-5),
                                          ("openvino", "auto", 1e-4), ("onnx-int8", "auto", 2e-2)):
        params = CrossEncoderParams(model=str(folder), backend=backend, batch_size=5, precision=precision)
        scorer = onnx_pair_scorer(folder, params)
        scores = scorer.score(pairs, params.batch_size)
        assert scores.shape == torch_scores.shape
        assert np.abs(scores - torch_scores).max() < tolerance, (backend, precision)
        # ONNX Runtime computes in f32; OpenVINO at auto in what it chose for this CPU, and says which
        assert scorer.precision == "f32" if precision == "f32" or backend.startswith("onnx") else \
            scorer.precision in ("bf16", "f32")
    assert (tmp_path / "exported").is_dir()


def test_openvino_int8_is_calibrated_on_the_corpus_and_ranks_as_torch(seeded_cross_encoder, pairs, monkeypatch,
                                                                     tmp_path):
    """Static int8 (NNCF, calibrated on pseudo-queries from the demo corpus): scores that follow torch's, and
    the quantized model built once and then reused. The seeded head's scores all sit near 0.5 (a spread of
    ~0.005), so the check is relative to that spread; agreement on a trained reranker's rankings (nDCG@10
    within 0.005 of torch) is benchmarks/rerank.py's, which needs a model that takes minutes to train."""
    from sentence_transformers import CrossEncoder

    monkeypatch.setenv("KBENCH_MODELS_DIR", str(tmp_path))
    _, chunks = chunked_corpus(DatasetConfig(name="demo"), ChunkingConfig(strategy="fixed", chunk_size=600,
                                                                            chunk_overlap=100))
    calibration = calibration_pairs([c.text for c in chunks], queries=3)
    assert calibration == calibration_pairs([c.text for c in chunks], queries=3)  # seeded: same sample
    assert [len(batch) for batch in calibration] == [25, 25, 25]
    assert all(query.split() == text.split()[:12] for query, text in (batch[0] for batch in calibration))

    folder = resolve_cross_encoder(str(seeded_cross_encoder))
    torch_scores = CrossEncoder(str(folder), device="cpu", local_files_only=True).predict(
        [list(p) for p in pairs], show_progress_bar=False)
    params = CrossEncoderParams(model=str(folder), backend="openvino-int8", batch_size=25)
    scores = onnx_pair_scorer(folder, params, calibration).score(pairs, params.batch_size)
    assert np.corrcoef(scores, torch_scores)[0, 1] > 0.85  # 0.91 here
    assert np.abs(scores - torch_scores).max() < 0.5 * np.ptp(torch_scores)  # 0.0014 against a spread of 0.0046
    built = sorted((tmp_path / "exported").glob("*/scorer-openvino-int8-*/model.xml"))
    assert len(built) == 1 and not list(built[0].parent.parent.glob(".partial-*"))
    stamp = built[0].stat().st_mtime_ns
    onnx_pair_scorer(folder, params, calibration)  # the same model and sample: loaded, not rebuilt
    assert built[0].stat().st_mtime_ns == stamp


def test_an_unknown_rerank_backend_is_a_config_error(config_for):
    with pytest.raises(ConfigError, match="rerank.backend"):
        load_experiment(config_for(rerank={"enabled": True, "strategy": "cross_encoder", "backend": "tensorrt"}))


def test_rerank_precision_is_an_openvino_knob(config_for):
    with pytest.raises(ConfigError, match="rerank.precision: f32 applies to rerank.backend=openvino"):
        load_experiment(config_for(rerank={"enabled": True, "strategy": "cross_encoder", "backend": "onnx",
                                           "precision": "f32"}))
