"""Embedding providers come from a registry: the config names one, an unknown name fails with the allowed
ones, and each provider names its model in the embedding cache key as it did before the registry."""
from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from kbench.config import ConfigError, load_experiment
from kbench.embedding.config import EmbeddingConfig
from kbench.embedding.models import resolve_model_path
from kbench.embedding.openai_compat import OpenAICompatibleEncoder
from kbench.embedding.registry import EMBEDDING_PROVIDERS
from kbench.embedding.sentence_transformers import SentenceTransformerEncoder
from kbench.embedding.stage import CachedEmbedder, load_encoder
from tests.embedding.embeddings_server import DIMENSION, start_embeddings_server, text_vector


@pytest.fixture
def embeddings_server():
    server = start_embeddings_server()
    yield server
    server.close()


def test_the_registry_holds_every_provider():
    assert EMBEDDING_PROVIDERS.names() == ["openai", "sentence_transformers", "static"]
    assert EMBEDDING_PROVIDERS.get("sentence_transformers").impl is SentenceTransformerEncoder
    assert EMBEDDING_PROVIDERS.get("openai").impl is OpenAICompatibleEncoder


def test_an_unknown_provider_is_a_config_error_naming_the_allowed_ones():
    with pytest.raises(ConfigError) as info:
        load_experiment({"dataset": {"name": "demo"}, "embedding": {"provider": "cohere"}})
    assert "embedding.provider: unknown value 'cohere'; allowed: openai, sentence_transformers, static" in str(info.value)
    with pytest.raises(ValidationError, match="allowed: openai, sentence_transformers, static"):
        EmbeddingConfig(provider="cohere")


def test_sentence_transformers_is_the_default_and_keys_the_cache_by_the_model_folder(tmp_path):
    encoder = load_encoder(EmbeddingConfig())
    assert isinstance(encoder, SentenceTransformerEncoder)
    assert encoder.dimension == 384
    embedder = CachedEmbedder(EmbeddingConfig(), tmp_path)
    assert embedder.fingerprint["model"] == resolve_model_path("all-MiniLM-L6-v2").name
    assert embedder.fingerprint["provider"] == "sentence_transformers"


def test_openai_provider_embeds_through_the_endpoint_and_caches_by_model_name(embeddings_server, tmp_path,
                                                                              monkeypatch):
    monkeypatch.setenv("KBENCH_TEST_EMBED_KEY", "sk-test")
    config = EmbeddingConfig(provider="openai", model="fake-embed", base_url=embeddings_server.base_url,
                             api_key_env="KBENCH_TEST_EMBED_KEY")
    embedder = CachedEmbedder(config, tmp_path)
    assert isinstance(embedder.encoder, OpenAICompatibleEncoder)
    assert embedder.fingerprint["model"] == "fake-embed" and embedder.fingerprint["provider"] == "openai"

    first = embedder.embed(["alpha", "beta", "alpha"])
    expected = np.stack([text_vector(t) for t in ("alpha", "beta", "alpha")])
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    assert first.vectors.shape == (3, DIMENSION) and not first.failed
    assert np.allclose(first.vectors, expected, atol=1e-6)
    assert (first.cache_hits, first.cache_misses) == (0, 2)
    assert embeddings_server.requests[0]["model"] == "fake-embed"
    assert embeddings_server.requests[0]["authorization"] == "Bearer sk-test"

    again = CachedEmbedder(config, tmp_path).embed(["beta", "alpha"])
    assert (again.cache_hits, again.cache_misses) == (2, 0)
    assert len(embeddings_server.requests) == 1  # served from the cache


def test_openai_provider_without_endpoint_or_key_says_what_to_set(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="embedding.base_url"):
        load_encoder(EmbeddingConfig(provider="openai"))
    monkeypatch.delenv("KBENCH_TEST_NO_KEY", raising=False)
    with pytest.raises(ValueError, match="KBENCH_TEST_NO_KEY is not set"):
        load_encoder(EmbeddingConfig(provider="openai", base_url="http://127.0.0.1:9/v1",
                                     api_key_env="KBENCH_TEST_NO_KEY"))


def test_a_batch_of_queries_goes_through_the_vector_cache_and_one_query_never_does(tmp_path, monkeypatch):
    config = EmbeddingConfig(model="tokenlearn-static-64", provider="static", query_prefix="query: ")
    embedder = CachedEmbedder(config, tmp_path)
    questions = ["which gene regulates cell growth?", "does vitamin D lower blood pressure?"]
    first = embedder.embed_queries(questions)
    direct = embedder._finish(embedder.encoder.encode(["query: " + q for q in questions]))
    np.testing.assert_allclose(first, direct, rtol=1e-6, atol=1e-7)  # the prefix applied, vectors normalized
    calls = []
    encode = embedder.encoder.encode
    monkeypatch.setattr(embedder.encoder, "encode", lambda texts, **kw: calls.append(list(texts)) or encode(texts, **kw))
    again = CachedEmbedder(config, tmp_path)
    again.encoder = embedder.encoder
    assert np.array_equal(again.embed_queries(questions), first) and calls == []  # a sweep's next config: cached
    again.embed_queries(questions[:1])  # the latency path: always encoded, never served from the cache
    assert calls == [["query: " + questions[0]]]
    # a query's vector is never served to a chunk of the same text (the prefixes differ, so the keys do)
    assert again.embed([questions[0]]).cache_misses == 1
