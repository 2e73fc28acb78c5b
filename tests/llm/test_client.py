"""The one LLM client against a real ``kbench serve`` (in-process, embeddings only: MiniLM answers in
milliseconds) with injected faults: retries, Retry-After, backoff, quota stops, bad texts, the cache, usage."""
from __future__ import annotations

import socket
import time

import numpy as np
import pytest

from kbench.cache import EmbeddingCache
from kbench.embedding.config import EmbeddingConfig
from kbench.embedding.stage import CachedEmbedder, load_encoder
from kbench.errors import ConfigError
from kbench.hashing import sha256_text
from kbench.llm import (Endpoint, EndpointUnreachableError, LLMClient, LLMPolicy, LLMStoppedError,
                        ModelPrice, QuotaExhaustedError, UsageMeter)
from kbench.serve import Fault, start_server

KEY_ENV = "KBENCH_TEST_LLM_CLIENT_KEY"
SECRET = "sk-kbench-client-test-5e4d3c2b1a-never-log"
MODEL = "all-MiniLM-L6-v2"
TEXTS = ["retries back off exponentially", "a quota error stops the run", "vectors are cached by text hash",
         "the server answers on loopback", "jitter spreads retries apart", "Retry-After says how long to wait"]


@pytest.fixture(scope="module")
def server():
    running = start_server(chat=False)
    yield running
    running.close()


@pytest.fixture(autouse=True)
def clean_faults(server, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    server.state.faults.clear()
    yield
    server.state.faults.clear()


def make_client(server, tmp_path=None, *, sleeps=None, meter=None, **policy) -> LLMClient:
    policy = {"backoff_base_s": 0.01, "backoff_max_s": 0.05, **policy}
    return LLMClient(Endpoint("embedding", server.base_url, MODEL, KEY_ENV, kind="embeddings"), stage="embedding",
                     policy=LLMPolicy(**policy), cache_root=tmp_path, meter=meter,
                     sleep=(sleeps.append if sleeps is not None else time.sleep))


def in_process(texts, dimension=None) -> np.ndarray:
    return load_encoder(EmbeddingConfig(model=MODEL, dimension=dimension)).encode(texts)


def test_embeddings_equal_the_in_process_models_with_dimensions(server):
    client = make_client(server)
    result = client.embed(TEXTS, dimensions=128)
    assert result.success_count == len(TEXTS) and not result.failed_items and result.indices == list(range(6))
    np.testing.assert_allclose(np.stack(result.embeddings), in_process(TEXTS, 128), rtol=0, atol=1e-6)
    assert result.embeddings[0].shape == (128,)


def test_retry_after_is_honoured_and_counted(server):
    server.state.faults.add(Fault("429", times=2, retry_after_s=0.25))
    sleeps, meter = [], UsageMeter()
    result = make_client(server, sleeps=sleeps, meter=meter).embed(TEXTS[:2])
    assert result.success_count == 2 and sleeps == [0.25, 0.25]
    counts = meter.stage_totals()["embedding"]
    assert counts["retries"] == 2 and counts["requests"] == 3 and counts["failures"] == 0


def test_5xx_malformed_and_slow_answers_are_retried_with_jittered_exponential_backoff(server):
    for kind in ("500", "malformed"):
        server.state.faults.add(Fault(kind, times=1))
    server.state.faults.add(Fault("slow", times=1, delay_s=20))
    sleeps, meter = [], UsageMeter()
    result = make_client(server, sleeps=sleeps, meter=meter, timeout_s=8, backoff_base_s=0.1,
                         backoff_max_s=10, concurrency=1).embed(TEXTS[:3])
    assert result.success_count == 3 and not result.failed_items
    # three injected faults, three retries at least (a loaded machine may time out a normal answer too)
    assert len(sleeps) >= 3 and all(0 <= s <= min(10, 0.1 * 2 ** i) for i, s in enumerate(sleeps))
    assert meter.stage_totals()["embedding"]["retries"] == len(sleeps)
    assert server.state.faults.served.get("malformed") and server.state.faults.served.get("slow")
    np.testing.assert_allclose(np.stack(result.embeddings), in_process(TEXTS[:3]), atol=1e-6)


def test_retries_give_up_with_a_recorded_failure_never_a_zero_vector(server):
    server.state.faults.add(Fault("500", times=-1))
    result = make_client(server, sleeps=[], max_retries=2, batch_size=8).embed(TEXTS[:1])
    assert result.success_count == 0 and result.embeddings == [] and result.stopped is None
    (failure,) = result.failed_items
    assert failure.index == 0 and "HTTP 500" in failure.error and "after 3 attempts" in failure.error


def test_one_bad_text_fails_alone_and_the_rest_of_its_batch_is_embedded(server):
    texts = TEXTS[:3] + ["this text <<fault:500>> is refused"] + TEXTS[3:]
    result = make_client(server, sleeps=[], max_retries=1, batch_size=8).embed(texts)
    assert [f.index for f in result.failed_items] == [3] and result.indices == [0, 1, 2, 4, 5, 6]
    assert all(np.abs(v).sum() > 0 for v in result.embeddings)
    np.testing.assert_allclose(np.stack(result.embeddings), in_process(TEXTS), atol=1e-6)
    assert result.texts_processed == TEXTS


def test_quota_exhaustion_stops_at_once_and_keeps_what_finished(server, tmp_path):
    server.state.faults.add(Fault("pass", times=2))
    server.state.faults.add(Fault("quota", times=-1))
    sleeps = []
    result = make_client(server, sleeps=sleeps, concurrency=1, batch_size=2).embed(TEXTS)
    assert result.stopped is not None and "quota is exhausted" in result.stopped and sleeps == []  # no retry
    assert result.indices == [0, 1, 2, 3] and result.success_count == 4
    assert [f.index for f in result.failed_items] == [4, 5]
    with pytest.raises(QuotaExhaustedError, match="quota is exhausted"):
        make_client(server).chat("hi")  # one request: the error itself

    # through the embedding stage: the run stops, the four finished vectors are cached, a re-run embeds two
    server.state.faults.clear()
    server.state.faults.add(Fault("pass", times=2))
    server.state.faults.add(Fault("quota", times=-1))
    config = EmbeddingConfig(provider="openai", model=MODEL, base_url=server.base_url, api_key_env=KEY_ENV,
                             batch_size=2)
    embedder = CachedEmbedder(config, tmp_path)
    embedder.encoder.client.policy = embedder.encoder.client.policy.model_copy(update={"concurrency": 1})
    with pytest.raises(LLMStoppedError, match="embedding: stopped after 4 of 6"):
        embedder.embed(TEXTS)
    cached = EmbeddingCache(tmp_path, embedder.fingerprint)
    assert len(cached.get_many([sha256_text(t) for t in TEXTS])) == 4
    server.state.faults.clear()
    again = CachedEmbedder(config, tmp_path).embed(TEXTS)
    assert (again.cache_hits, again.cache_misses) == (4, 2) and not again.failed
    expected = in_process(TEXTS)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(again.vectors, expected, atol=1e-6)


def test_a_refused_connection_fails_in_seconds_naming_base_url(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    client = LLMClient(Endpoint("enrichment", url, "m", KEY_ENV), stage="enrichment", sleep=[].append)
    with pytest.raises(EndpointUnreachableError, match=f"cannot connect to {url}.*enrichment.base_url") as e:
        client.chat("hello")
    assert SECRET not in str(e.value) and SECRET not in repr(client)
    batch = client.chat_many(["a", "b"])  # the client has stopped: nothing more is sent
    assert batch.stopped and not batch.answers and all(f.attempts == 0 for f in batch.failed_items)


def test_missing_endpoint_model_or_key_is_one_config_error(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("KBENCH_NO_SUCH_KEY", raising=False)
    with pytest.raises(ConfigError) as e:
        LLMClient(Endpoint("query.expansion", None, None, "KBENCH_NO_SUCH_KEY"), stage="query")
    message = str(e.value)
    assert "query.expansion.base_url" in message and "query.expansion.model" in message
    assert "KBENCH_NO_SUCH_KEY is not set" in message


def test_a_client_error_is_not_retried(server):
    sleeps = []
    client = LLMClient(Endpoint("embedding", server.base_url, "no-such-model", KEY_ENV, kind="embeddings"),
                       stage="embedding", sleep=sleeps.append)
    result = client.embed(["x"])
    assert result.failed_items and "HTTP 404" in result.failed_items[0].error and sleeps == []


def test_answers_are_cached_by_model_text_and_parameters(server, tmp_path):
    before = server.state.requests.get("/v1/embeddings", 0)
    meter = UsageMeter()
    first = make_client(server, tmp_path, meter=meter).embed(TEXTS[:3], dimensions=64)
    again = make_client(server, tmp_path, meter=meter).embed(TEXTS[:3], dimensions=64)
    assert again.cache_hits == 3 and server.state.requests["/v1/embeddings"] == before + 1
    np.testing.assert_array_equal(np.stack(first.embeddings), np.stack(again.embeddings))
    other = make_client(server, tmp_path, meter=meter).embed(TEXTS[:3], dimensions=32)  # other parameters
    assert other.cache_hits == 0 and server.state.requests["/v1/embeddings"] == before + 2
    totals = meter.stage_totals({MODEL: ModelPrice(input_per_million=2.0)})["embedding"]
    assert totals["cache_hits"] == 3 and totals["requests"] == 2 and totals["prompt_tokens"] > 0
    assert totals["cost_usd"] == pytest.approx(totals["prompt_tokens"] * 2.0 / 1e6)
    metrics = meter.metrics()
    assert metrics["llm_embedding_requests"] == 2 and metrics["llm_total_requests"] == 2
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(encoding="utf-8", errors="replace")


def test_usage_metrics_name_each_stage_and_price_each_model():
    meter = UsageMeter()
    meter.add("enrichment", "gpt-x", requests=2, prompt_tokens=1000, completion_tokens=500)
    meter.add("rerank", "gpt-y", requests=1, prompt_tokens=100, completion_tokens=10, retries=1)
    prices = {"gpt-x": ModelPrice(input_per_million=1.0, output_per_million=4.0)}
    metrics = meter.metrics(prices)
    assert metrics["llm_enrichment_cost_usd"] == pytest.approx((1000 * 1.0 + 500 * 4.0) / 1e6)
    assert metrics["llm_rerank_cost_usd"] == 0.0  # not in the price table
    assert metrics["llm_total_requests"] == 3 and metrics["llm_total_retries"] == 1
    assert metrics["llm_total_prompt_tokens"] == 1100


def dead_url() -> str:
    with socket.socket() as s:  # a port nobody listens on once the socket is closed
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


def test_the_cache_is_keyed_by_endpoint_and_checks_it_before_replaying(server, tmp_path):
    """Issue 42.7 / 45: cached answers were replayed for a dead endpoint under the same model name, and the
    cache ignored the base URL. Now another base URL is another namespace, and a replay first checks the endpoint."""
    first = make_client(server, tmp_path).embed(TEXTS[:2])
    assert not first.failed_items and first.cache_hits == 0
    assert make_client(server, tmp_path).embed(TEXTS[:2]).cache_hits == 2  # same endpoint: replayed

    url = dead_url()  # the same model name somewhere else, dead: no replay, a stop naming base_url
    elsewhere = LLMClient(Endpoint("embedding", url, MODEL, KEY_ENV, kind="embeddings"), stage="embedding",
                          cache_root=tmp_path, sleep=[].append)
    result = elsewhere.embed(TEXTS[:2])
    assert result.cache_hits == 0 and not result.embeddings and result.stopped
    assert f"cannot connect to {url}" in result.stopped and "embedding.base_url" in result.stopped

    # the same base URL as the cached answers, its server gone: the check stops before any replay
    gone = start_server(chat=False)
    same = LLMClient(Endpoint("embedding", gone.base_url, MODEL, KEY_ENV, kind="embeddings"), stage="embedding",
                     cache_root=tmp_path / "gone", sleep=[].append)
    assert not same.embed(TEXTS[:2]).failed_items
    gone.close()
    again = LLMClient(Endpoint("embedding", gone.base_url, MODEL, KEY_ENV, kind="embeddings"), stage="embedding",
                      cache_root=tmp_path / "gone", sleep=[].append)
    with pytest.raises(EndpointUnreachableError, match=f"cannot connect to {gone.base_url}"):
        again.embed(TEXTS[:2])
    with pytest.raises(LLMStoppedError):
        again.chat("hello")
