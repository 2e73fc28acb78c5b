"""The offline catalogue's extra embedders on real SciFact data, and the dimension knob.

Each model must put a query's relevant abstract near the top among 95 abstracts (the 40 first test
queries' relevant ones plus others): far above chance (MRR 0.054), which a broken tokenizer, pooling or
weight file would not be."""
from __future__ import annotations

import csv
import json

import numpy as np
import onnxruntime as ort
import pytest
from tokenizers import Tokenizer

from kbench.embedding.config import EmbeddingConfig
from kbench.embedding.models import CATALOGUE, resolve_model_path
from kbench.embedding.stage import CachedEmbedder, l2_normalize, load_encoder
from tests.conftest import SCIFACT


@pytest.fixture(scope="module")
def scifact_slice():
    relevant: dict[str, str] = {}
    with (SCIFACT / "qrels" / "test.tsv").open(encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            relevant.setdefault(row["query-id"], row["corpus-id"])
    queries, docs = {}, {}
    for line in (SCIFACT / "queries.jsonl").open(encoding="utf-8"):
        q = json.loads(line)
        queries[q["_id"]] = q["text"]
    for line in (SCIFACT / "corpus.jsonl").open(encoding="utf-8"):
        d = json.loads(line)
        docs[d["_id"]] = (d.get("title", "") + " " + d["text"]).strip()
    qids = sorted(relevant)[:40]
    ids = list(dict.fromkeys([relevant[q] for q in qids] + list(docs)[:60]))
    return [queries[q] for q in qids], [docs[i] for i in ids], [ids.index(relevant[q]) for q in qids]


def mrr(encoder, scifact_slice) -> float:
    queries, docs, answers = scifact_slice
    scores = l2_normalize(encoder.encode(queries, for_queries=True)) @ l2_normalize(encoder.encode(docs)).T
    ranks = [1 + (row > row[a]).sum() for row, a in zip(scores, answers)]
    return float(np.mean(1 / np.array(ranks)))


@pytest.mark.parametrize("config, dimension, floor", [
    ({"model": "wordllama-l2-supercat", "provider": "static"}, 256, 0.7),  # measured 0.89
    ({"model": "tokenlearn-static-64", "provider": "static"}, 64, 0.3),  # measured 0.47
    ({"model": "paraphrase-MiniLM-L3-v2", "backend": "onnx"}, 384, 0.7),  # measured 0.90
])
def test_each_extra_embedder_finds_relevant_abstracts(config, dimension, floor, scifact_slice):
    encoder = load_encoder(EmbeddingConfig(**config))
    assert encoder.dimension == CATALOGUE[config["model"]].dimension == dimension
    assert encoder.encode(["one", "two"]).shape == (2, dimension)
    assert mrr(encoder, scifact_slice) >= floor


def test_paraphrase_minilm_pooling_equals_the_pooled_output_the_onnx_file_ships(scifact_slice):
    """The package ships no tokenizer: BERT uncased WordPiece (all-MiniLM-L6-v2's) is verified by the model's
    own pooled output, which must equal kbench's mean pooling of its token embeddings."""
    spec = CATALOGUE["paraphrase-MiniLM-L3-v2"]
    texts = scifact_slice[0][:4] + scifact_slice[1][:2]
    tokenizer = Tokenizer.from_file(str(resolve_model_path("all-MiniLM-L6-v2") / "tokenizer.json"))
    tokenizer.enable_truncation(128)
    tokenizer.enable_padding(pad_id=0)
    batch = tokenizer.encode_batch(texts)
    session = ort.InferenceSession(str(resolve_model_path(spec.name) / spec.marker))
    feeds = {"input_ids": np.array([e.ids for e in batch], dtype=np.int64),
             "attention_mask": np.array([e.attention_mask for e in batch], dtype=np.int64)}
    pooled = [o for o, meta in zip(session.run(None, feeds), session.get_outputs()) if len(meta.shape) == 2
              and meta.shape[1] == 384]
    assert len(pooled) == 1
    ours = load_encoder(EmbeddingConfig(model=spec.name, backend="onnx")).encode(texts)
    assert np.abs(ours - pooled[0]).max() < 1e-5


def test_a_model_on_the_wrong_provider_or_backend_says_what_to_set():
    """Written wrong: refused when the config loads, naming the fix. Left out: the one the model needs."""
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="set embedding.provider=static"):
        EmbeddingConfig(model="wordllama-l2-supercat", provider="sentence_transformers")
    with pytest.raises(ValidationError, match="set embedding.backend=onnx"):
        EmbeddingConfig(model="paraphrase-MiniLM-L3-v2", backend="torch")
    with pytest.raises(ValidationError, match="static model with no backend"):
        EmbeddingConfig(model="tokenlearn-static-64", provider="static", backend="onnx")
    assert EmbeddingConfig(model="wordllama-l2-supercat").provider == "static"
    assert EmbeddingConfig(model="paraphrase-MiniLM-L3-v2").backend == "exact"  # chosen among onnx and openvino
    assert EmbeddingConfig(model="all-MiniLM-L6-v2", provider="openai").provider == "openai"  # served by an API
    with pytest.raises(ValueError, match="set embedding.provider=static"):  # the encoder still says so itself
        load_encoder(EmbeddingConfig.model_construct(**{**dict(EmbeddingConfig()), "model": "wordllama-l2-supercat"}))


def test_every_catalogue_entry_names_its_source_licence_and_limits():
    for spec in CATALOGUE.values():
        assert spec.packages and spec.install.startswith("pip install") and spec.licence
        assert spec.dimension > 0 and spec.backends
        assert spec.max_tokens is None or spec.max_tokens >= 128


@pytest.mark.parametrize("config", [{}, {"model": "wordllama-l2-supercat", "provider": "static"}])
def test_the_dimension_knob_keeps_the_first_dims_renormalized(config, tmp_path):
    texts = ["Gene expression in tumour cells.", "Vaccines and antibody response in the elderly."]
    full = CachedEmbedder(EmbeddingConfig(**config), tmp_path).embed(texts).vectors
    cut = CachedEmbedder(EmbeddingConfig(**config, dimension=64), tmp_path)
    vectors = cut.embed(texts).vectors
    assert cut.dimension == 64 and vectors.shape == (2, 64)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-6)
    assert np.allclose(vectors, l2_normalize(full[:, :64]), atol=1e-6)
    with pytest.raises(ValueError, match="embedding.dimension: 4096 is larger"):
        load_encoder(EmbeddingConfig(**config, dimension=4096))


def test_a_model_retrained_under_the_same_name_gets_a_new_revision(tmp_path):
    """Exports and cached vectors are keyed by the revision; retrained weights have the same size as the old."""
    import shutil

    from kbench.embedding.sentence_transformers import model_revision

    original = resolve_model_path("all-MiniLM-L6-v2")
    folder = tmp_path / "retrained"
    shutil.copytree(original, folder)
    assert model_revision(folder) == model_revision(original)  # same bytes, same revision wherever they sit
    weights = next(folder.glob("*.safetensors"))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # one byte of one weight changed, the size unchanged
    weights.write_bytes(bytes(data))
    assert weights.stat().st_size == next(original.glob("*.safetensors")).stat().st_size
    assert model_revision(folder) != model_revision(original)
