"""``kbench serve``: a real process answering the OpenAI protocol with the catalogue's embedder and SmolLM2;
a run through it equals a run in-process; faults are retried and recorded; the key is found nowhere."""
from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

from kbench.config import load_experiment
from kbench.embedding.config import EmbeddingConfig
from kbench.embedding.stage import load_encoder
from kbench.llm import Endpoint, LLMClient
from kbench.pipeline import run_pipeline
from kbench.runner import run_experiment

KEY_ENV = "KBENCH_TEST_SERVE_KEY"
SECRET = "sk-kbench-serve-test-0a9b8c7d6e-never-log"


def get(url: str) -> dict:
    return json.loads(urllib.request.urlopen(url, timeout=30).read())


def wait_for_log(path: str, parts: tuple[str, ...], seconds: float = 30) -> str:
    """The server's log, once it holds every part: a request's line is written after its answer is sent."""
    deadline = time.monotonic() + seconds
    while True:
        log = open(path, encoding="utf-8").read()
        if all(part in log for part in parts) or time.monotonic() > deadline:
            return log
        time.sleep(0.1)


def test_it_says_when_ready_on_loopback_and_lists_its_models(kbench_server):
    assert kbench_server.base_url.startswith("http://127.0.0.1:") and "ready at" in kbench_server.banner
    ids = [m["id"] for m in get(f"{kbench_server.base_url}/models")["data"]]
    assert "all-MiniLM-L6-v2" in ids and "SmolLM2-135M-Instruct" in ids


def test_a_non_loopback_host_is_refused_without_allow_remote():
    done = subprocess.run([sys.executable, "-c", "import sys; from kbench.cli import main; sys.exit(main())",
                           "serve", "--host", "0.0.0.0", "--port", "0", "--no-chat"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "loopback only" in done.stderr and "--allow-remote" in done.stderr


def test_embeddings_with_dimensions_equal_the_in_process_models(kbench_server, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    texts = ["how do retries back off?", "contextual embeddings situate a chunk", "x"]
    client = LLMClient(Endpoint("embedding", kbench_server.base_url, "all-MiniLM-L6-v2", KEY_ENV), stage="embedding")
    for dimensions in (None, 96):
        served = np.stack(client.embed(texts, dimensions=dimensions).embeddings)
        local = load_encoder(EmbeddingConfig(model="all-MiniLM-L6-v2", dimension=dimensions)).encode(texts)
        np.testing.assert_allclose(served, local, rtol=0, atol=1e-6)


@pytest.mark.slow  # two runs embedding the same slice, one in-process and one through the server
def test_a_run_through_the_server_gives_the_in_process_metrics(kbench_server, config_for, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    small = {"name": "demo", "max_queries": 6, "max_documents": 3}
    local = run_pipeline(load_experiment(config_for(dataset=small, retrieval={"legs": ["vector"], "top_k": 10,
                                                                              "latency": "batch"})), progress=False)
    assert not kbench_server.alive(), kbench_server.alive()
    served = run_pipeline(load_experiment(config_for(
        dataset=small, retrieval={"legs": ["vector"], "top_k": 10, "latency": "batch"}, embedding={
            "provider": "openai", "model": "all-MiniLM-L6-v2", "base_url": kbench_server.base_url,
            "api_key_env": KEY_ENV})), progress=False)
    quality = [k for k in local.metrics if k.startswith(("doc_", "chunk_", "span_"))]
    assert quality
    for name in quality:
        assert served.metrics[name] == pytest.approx(local.metrics[name], abs=1e-9), name
    assert served.metrics["llm_embedding_requests"] >= 1 and "llm_embedding_requests" not in local.metrics


@pytest.mark.slow  # SmolLM2 generates on CPU
def test_chat_completions_come_from_smollm2_with_token_usage(kbench_server, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    body = json.dumps({"model": "SmolLM2-135M-Instruct", "max_tokens": 8,
                       "messages": [{"role": "user", "content": "Say hello."}]}).encode()
    request = urllib.request.Request(f"{kbench_server.base_url}/chat/completions", data=body,
                                     headers={"Content-Type": "application/json",
                                              "Authorization": f"Bearer {SECRET}"})
    answer = json.loads(urllib.request.urlopen(request, timeout=600).read())
    text = answer["choices"][0]["message"]["content"]
    assert isinstance(text, str) and text.strip()
    usage = answer["usage"]
    assert usage["prompt_tokens"] > 3 and 1 <= usage["completion_tokens"] <= 8
    # one request log line on stderr: route, status, seconds, model and tokens; never the key
    expected = (f"POST /v1/chat/completions 200 in ", f"(model SmolLM2-135M-Instruct, {usage['prompt_tokens']} "
                f"prompt + {usage['completion_tokens']} completion tokens)")
    log = wait_for_log(kbench_server.log_path, expected)
    assert all(part in log for part in expected), log[-2000:]
    assert SECRET not in log
    assert "1 torch thread)" in kbench_server.banner  # --threads 1 unless asked otherwise


def test_the_request_log_has_one_line_per_request():
    from kbench.serve import start_server

    lines: list[str] = []
    running = start_server(port=0, chat=False, preload=(), log=lines.append)
    try:
        for fault in ("500", None):
            headers = {"Content-Type": "application/json", "Authorization": "Bearer sk-not-logged"}
            if fault:
                headers["X-Kbench-Fault"] = fault
            request = urllib.request.Request(f"{running.base_url}/chat/completions", headers=headers, data=json.dumps(
                {"model": "m", "messages": [{"role": "user", "content": "a secret prompt"}]}).encode())
            with pytest.raises(urllib.error.HTTPError):
                urllib.request.urlopen(request, timeout=30)
        # each line is written as its request ends, after the response is sent: under load the second request's
        # handler thread can log before the first one's does, so wait for both and compare them unordered
        deadline = time.monotonic() + 10
        while len(lines) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        running.close()
    assert sorted(line.split(" in ")[0] for line in lines) == ["kbench serve: POST /v1/chat/completions 404",
                                                               "kbench serve: POST /v1/chat/completions 500"]
    assert all(line.endswith("s (model m)") for line in lines)
    assert not any("sk-not-logged" in line or "secret prompt" in line for line in lines)


@pytest.mark.slow  # enrichment through SmolLM2, with faults, then the whole store searched for the key
def test_faults_are_retried_and_recorded_and_the_key_is_nowhere_in_the_store(kbench_server, config_for, workspace,
                                                                            monkeypatch):
    """Stays slow: the first test of the kbench-serve group pays the one real server's start (SmolLM2 and MiniLM
    load once per run: tests/conftest.py kbench_server), and SmolLM2 then reads each chunk with its page on CPU.
    One page (4 chunks of 3,000 characters) instead of three (10 chunks): three faults need three requests or
    retries, which one page gives as well, and the key is searched for in everything the run wrote alike."""
    monkeypatch.setenv(KEY_ENV, SECRET)
    kbench_server.faults("429", times=1, retry_after_s=0.1)
    kbench_server.faults("500", times=1)
    kbench_server.faults("malformed", times=1)
    endpoint = {"base_url": kbench_server.base_url, "api_key_env": KEY_ENV}
    config = config_for(
        name="served-enrichment", dataset={"name": "demo", "max_queries": 1, "max_documents": 1},  # 1 page, 4 chunks
        chunking={"strategy": "fixed", "chunk_size": 3000, "chunk_overlap": 0},
        enrichment={"enabled": True, "model": "SmolLM2-135M-Instruct", "max_tokens": 12, "document_chars": 600,
                    **endpoint},
        embedding={"provider": "openai", "model": "all-MiniLM-L6-v2", **endpoint},
        llm={"policy": {"backoff_base_s": 0.05}, "prices": {"SmolLM2-135M-Instruct": {"input_per_million": 0.15,
                                                                                    "output_per_million": 0.6}}},
    )
    try:
        result = run_experiment(load_experiment(config), progress=False)
    finally:
        kbench_server.faults(None)
    metrics = result.metrics
    # three injected faults, three retries at least (SmolLM2 on a loaded machine may also time out)
    assert metrics["llm_total_retries"] >= 3 and metrics["llm_total_failures"] == 0
    assert metrics["llm_enrichment_completion_tokens"] > 0 and metrics["llm_enrichment_cost_usd"] > 0
    assert metrics["count_enrichment_failed"] == 0 and metrics["count_embeddings_failed"] == 0
    for path in workspace.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert SECRET.encode() not in path.read_bytes(), path
    for path in (workspace / "cache").resolve().rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


@pytest.mark.slow  # SmolLM2 generates on CPU
def test_a_client_that_goes_away_stops_its_generation(kbench_server):
    """A client whose timeout gives up closes its socket; the server stops generating at the next token
    instead of finishing an answer nobody reads while the next request waits for the model."""
    import http.client
    import time
    from urllib.parse import urlparse

    url = urlparse(kbench_server.base_url)
    health = f"{url.scheme}://{url.netloc}/health"
    before = get(health)["cancelled_generations"]
    body = json.dumps({"model": "SmolLM2-135M-Instruct", "max_tokens": 2000, "messages": [
        {"role": "user", "content": "Count from 1 to 1000, one number per line."}]})
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=600)
    connection.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
    deadline = time.monotonic() + 300
    while not get(health)["chat_busy"]:  # the request reached the model (after any earlier generation)
        assert time.monotonic() < deadline, "the chat model never started generating"
        time.sleep(0.05)
    connection.close()  # the client gives up
    while get(health)["chat_busy"]:
        assert time.monotonic() < deadline, "the generation went on after its client left"
        time.sleep(0.05)
    assert get(health)["cancelled_generations"] == before + 1
    assert not kbench_server.alive(), kbench_server.alive()
    # the model is free for the next client
    request = urllib.request.Request(f"{kbench_server.base_url}/chat/completions", headers={
        "Content-Type": "application/json"}, data=json.dumps({"max_tokens": 4, "messages": [
            {"role": "user", "content": "Say hello."}]}).encode())
    assert json.loads(urllib.request.urlopen(request, timeout=600).read())["usage"]["completion_tokens"] >= 1
