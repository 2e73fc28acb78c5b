"""One loaded encoder per settings in a process: load_encoder keeps the last two local encoders and hands the same
one out again for the same embedding settings (a sweep's configs and the tests load MiniLM again and again)."""
from __future__ import annotations

import time

import numpy as np
import pytest

from kbench.embedding.config import EmbeddingConfig
from kbench.embedding.stage import LOADED_ENCODERS, forget_loaded_encoders, load_encoder, reusable
from tests.embedding.embeddings_server import start_embeddings_server


@pytest.fixture(autouse=True)
def nothing_kept():
    forget_loaded_encoders()
    yield
    forget_loaded_encoders()


def test_the_same_settings_get_the_loaded_encoder_back_at_no_cost(tmp_path):
    started = time.perf_counter()
    first = load_encoder(EmbeddingConfig(), exports=tmp_path)
    loading = time.perf_counter() - started
    started = time.perf_counter()
    again = load_encoder(EmbeddingConfig(), exports=tmp_path)
    assert again is first
    assert time.perf_counter() - started < loading / 10
    texts = ["How do I declare a path parameter?", "Dependencies with yield"]
    assert np.array_equal(again.encode(texts), first.encode(texts))


def test_settings_that_differ_in_any_knob_or_exports_folder_load_their_own(tmp_path):
    base = load_encoder(EmbeddingConfig(), exports=tmp_path)
    assert load_encoder(EmbeddingConfig(batch_size=8), exports=tmp_path) is not base
    assert load_encoder(EmbeddingConfig(), exports=tmp_path / "other") is not base


def test_only_the_last_two_are_kept(tmp_path):
    assert LOADED_ENCODERS == 2
    first = load_encoder(EmbeddingConfig(batch_size=1), exports=tmp_path)
    second = load_encoder(EmbeddingConfig(batch_size=2), exports=tmp_path)
    assert load_encoder(EmbeddingConfig(batch_size=1), exports=tmp_path) is first  # now the newest
    load_encoder(EmbeddingConfig(batch_size=3), exports=tmp_path)  # pushes out the least recently used
    assert load_encoder(EmbeddingConfig(batch_size=1), exports=tmp_path) is first
    assert load_encoder(EmbeddingConfig(batch_size=2), exports=tmp_path) is not second


def test_api_providers_and_a_calibrated_backend_are_never_kept(monkeypatch):
    assert reusable(EmbeddingConfig())
    assert not reusable(EmbeddingConfig(backend="openvino-int8"))  # calibrated on its first run's corpus
    server = start_embeddings_server()
    try:
        monkeypatch.setenv("KBENCH_TEST_EMBED_KEY", "sk-test")
        config = EmbeddingConfig(provider="openai", model="fake-embed", base_url=server.base_url,
                                 api_key_env="KBENCH_TEST_EMBED_KEY")
        assert not reusable(config)
        assert load_encoder(config) is not load_encoder(config)
    finally:
        server.close()
