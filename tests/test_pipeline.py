"""The pipeline's preflight: every stage that asks a chat model has its endpoint checked before any work (issue 45.1).

A run whose enrichment, query stage, LLM reranker or ragas judge points at a dead server, or carries a key the
server refuses, used to chunk and embed first and stop only at the stage's first request. Now it stops in
preflight, before the dataset is read, with one line naming the section to fix."""
from __future__ import annotations

import socket

import pytest

import kbench.pipeline
from kbench.config import load_experiment
from kbench.llm import AuthenticationError, EndpointUnreachableError
from kbench.pipeline import run_pipeline
from tests.enrichment.chat_server import start_chat_server
from tests.reliability.inputs import error_lines, run_kbench

KEY_ENV = "KBENCH_TEST_PREFLIGHT_KEY"


def dead_url() -> str:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


def llm_sections(section: str, url: str) -> dict:
    """Config sections turning on one LLM stage, pointed at ``url``."""
    llm = {"base_url": url, "model": "m", "api_key_env": KEY_ENV}
    return {
        "enrichment": {"enrichment": {"enabled": True, **llm}},
        "enrichment.code_examples": {"enrichment": {"code_examples": {"enabled": True, **llm}},
                                     "retrieval": {"legs": ["bm25", "code_examples"], "fusion": {"strategy": "rrf"},
                                                   "top_k": 10}},
        "query.hyde": {"query": {"hyde": {"enabled": True, **llm}}},
        "query.decomposition": {"query": {"decomposition": {"enabled": True, **llm}}},
        "rerank": {"rerank": {"enabled": True, "strategy": "llm", **llm}},
        "evaluation.ragas_llm": {"evaluation": {"k": [1, 5, 10], "ragas": ["llm_context_recall"],
                                                "ragas_llm": llm}},
    }[section]


@pytest.fixture
def dataset_never_read(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the dataset was read before the endpoint was checked")
    monkeypatch.setattr(kbench.pipeline, "read_dataset", refuse)


@pytest.mark.parametrize("section", ["enrichment", "enrichment.code_examples", "query.hyde", "query.decomposition",
                                     "rerank", "evaluation.ragas_llm"])
def test_a_dead_endpoint_stops_the_run_before_the_dataset_is_read(section, config_for, monkeypatch,
                                                                  dataset_never_read):
    monkeypatch.setenv(KEY_ENV, "local")
    url = dead_url()
    sections = {"retrieval": {"legs": ["bm25"], "top_k": 10}, **llm_sections(section, url)}
    with pytest.raises(EndpointUnreachableError) as raised:
        run_pipeline(load_experiment(config_for(**sections)), progress=False)
    assert str(raised.value).startswith(f"{section}: cannot connect to {url}"), raised.value
    assert f"fix {section}.base_url" in str(raised.value)


def test_a_refused_key_stops_the_run_before_any_question_is_asked(config_for, monkeypatch, dataset_never_read):
    server = start_chat_server()
    try:
        server.key = "the-right-key"
        monkeypatch.setenv(KEY_ENV, "a-wrong-key")
        config = config_for(retrieval={"legs": ["bm25"], "top_k": 10}, **llm_sections("query.hyde", server.base_url))
        with pytest.raises(AuthenticationError) as raised:
            run_pipeline(load_experiment(config), progress=False)
        assert str(raised.value).startswith(f"query.hyde: {server.base_url} refused the key from ${KEY_ENV}")
        assert "a-wrong-key" not in str(raised.value)
        assert server.model_lists == 1 and server.requests == []  # one check, no question sent
    finally:
        server.close()


def test_two_stages_on_one_endpoint_are_checked_once_and_the_run_goes_on(config_for, monkeypatch):
    server = start_chat_server()
    try:
        monkeypatch.setenv(KEY_ENV, "local")
        sections = {"retrieval": {"legs": ["bm25"], "top_k": 10}, "dataset": {"name": "demo", "max_queries": 3},
                    **llm_sections("query.hyde", server.base_url), **llm_sections("rerank", server.base_url)}
        result = run_pipeline(load_experiment(config_for(**sections)), progress=False)
        assert server.model_lists == 1  # the preflight's one check; the stages then ask their questions
        assert result.metrics["llm_query_hyde_requests"] == 3 and result.metrics["llm_rerank_requests"] >= 1
    finally:
        server.close()


def test_kbench_run_with_a_dead_endpoint_exits_2_in_one_line(tmp_path, monkeypatch):
    url = dead_url()
    config = tmp_path / "hyde.yaml"
    config.write_text(f"name: dead-hyde\nworkspace: {tmp_path / 'ws'}\ndataset: {{name: demo}}\n"
                      f"retrieval: {{legs: [bm25], top_k: 10}}\n"
                      f"query: {{hyde: {{enabled: true, base_url: '{url}', model: m, api_key_env: {KEY_ENV}}}}}\n")
    done = run_kbench("run", str(config), cwd=tmp_path, timeout=120, env={KEY_ENV: "local"})
    assert done.code == 2, done.err[-2000:]
    (line,) = error_lines(done.err)
    assert f"query.hyde: cannot connect to {url}" in line and "start the endpoint" in line, line
    assert not (tmp_path / "ws" / "runs").exists() or not any((tmp_path / "ws" / "runs").iterdir())
