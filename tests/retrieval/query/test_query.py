"""Query pre-stages: synonym expansion on a real run, the LLM answers' parsing, and (slow) decomposition and
HyDE through a real ``kbench serve`` with SmolLM2, each rewrite kept per query and cached."""
from __future__ import annotations

import json

import pytest

from kbench.config import ConfigError, load_experiment
from kbench.pipeline import run_pipeline
from kbench.retrieval.query.prompts import expand_with_synonyms, parse_parts

KEY_ENV = "KBENCH_TEST_QUERY_KEY"


def test_synonyms_are_appended_for_whole_terms_only_once():
    synonyms = {"retry": ["backoff", "retries"], "job": ["task"]}
    assert expand_with_synonyms("How does a retry work for my job?", synonyms) == \
        "How does a retry work for my job? backoff retries task"
    assert expand_with_synonyms("retrying jobs", synonyms) == "retrying jobs"  # not whole words
    assert expand_with_synonyms("retry with backoff", synonyms) == "retry with backoff retries"


def test_parts_are_read_from_numbered_or_bulleted_lines():
    answer = "1. What is a job?\n2) How are jobs retried?\n- What is a job?\n\nQ3: Where are metrics?\nok"
    assert parse_parts(answer, 3) == ["What is a job?", "How are jobs retried?", "Where are metrics?"]
    assert parse_parts("", 3) == []


def test_llm_stages_without_an_endpoint_fail_before_any_work(config_for, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv(KEY_ENV, raising=False)
    experiment = load_experiment(config_for(query={"hyde": {"enabled": True, "api_key_env": KEY_ENV}}))
    with pytest.raises(ConfigError, match="query.hyde.base_url"):
        run_pipeline(experiment, progress=False)
    with pytest.raises(ConfigError, match="synonyms list"):
        load_experiment(config_for(query={"expansion": {"enabled": True}}))


def test_synonym_expansion_searches_the_expanded_text_and_keeps_it_per_query(config_for):
    synonyms = {"worker": ["consumer", "process"], "jobs": ["tasks"], "retry": ["backoff"], "default": ["preset"],
                "lumend": ["daemon"], "timeout": ["deadline"]}
    base = {"dataset": {"name": "demo", "max_queries": 10}, "retrieval": {"legs": ["bm25"], "top_k": 10}}
    plain = run_pipeline(load_experiment(config_for(**base)), progress=False)
    expanded = run_pipeline(load_experiment(config_for(
        **base, query={"expansion": {"enabled": True, "strategy": "synonyms", "synonyms": synonyms}})), progress=False)
    frame = expanded.per_query.set_index("query_id")
    questions = {q.query_id: q.text for q in expanded.dataset.queries}
    changed = reranked = 0
    plain_frame = plain.per_query.set_index("query_id")
    for qid, text in questions.items():
        (searched,) = frame.loc[qid, "query_searched"]
        assert searched == expand_with_synonyms(text, synonyms)
        assert json.loads(frame.loc[qid, "query_rewrites"])["expansion"] == searched
        if searched != text:
            changed += 1
            reranked += list(frame.loc[qid, "retrieved"]) != list(plain_frame.loc[qid, "retrieved"])
        else:
            assert list(frame.loc[qid, "retrieved"]) == list(plain_frame.loc[qid, "retrieved"])
    assert changed > 0 and reranked > 0 and expanded.metrics["count_query_rewrite_failures"] == 0


@pytest.mark.slow  # SmolLM2 writes the sub-questions and the hypothetical answers
def test_decomposition_and_hyde_through_kbench_serve_are_kept_cached_and_counted(kbench_server, config_for,
                                                                               monkeypatch):
    """Stays slow: SmolLM2 writes the sub-questions and passages on CPU through the one real kbench serve (whose
    start the first test of the kbench-serve group pays), for two questions only."""
    monkeypatch.setenv(KEY_ENV, "local")
    llm = {"base_url": kbench_server.base_url, "model": "SmolLM2-135M-Instruct", "api_key_env": KEY_ENV}
    config = config_for(dataset={"name": "demo", "max_queries": 2}, retrieval={"legs": ["bm25"], "top_k": 10},
                        query={"decomposition": {"enabled": True, "max_parts": 2, "max_tokens": 40, **llm},
                               "hyde": {"enabled": True, "max_tokens": 24, **llm}})
    first = run_pipeline(load_experiment(config), progress=False)
    frame = first.per_query.set_index("query_id")
    for query in first.dataset.queries:
        rewrites = json.loads(frame.loc[query.query_id, "query_rewrites"])
        searched = list(frame.loc[query.query_id, "query_searched"])
        assert rewrites["hyde"] == searched and all(isinstance(t, str) and t for t in searched)
        assert 1 <= len(searched) <= 3  # the question and at most two parts, each replaced by its passage
        assert len(frame.loc[query.query_id, "retrieved"]) > 0
    # requests counts every attempt: a retry (the served model may still be loading) is a request too
    metrics = first.metrics
    assert metrics["llm_query_decomposition_requests"] - metrics.get("llm_query_decomposition_retries", 0) == 2
    assert first.metrics["llm_query_hyde_completion_tokens"] > 0
    again = run_pipeline(load_experiment(config), progress=False)  # every rewrite from the cache
    assert "llm_query_hyde_requests" not in again.metrics or again.metrics["llm_query_hyde_requests"] == 0
    assert again.metrics["llm_total_cache_hits"] >= 2 + len(first.dataset.queries)
    assert list(again.per_query["query_searched"].map(list)) == list(first.per_query["query_searched"].map(list))


@pytest.fixture
def weak_chat_server():
    from tests.enrichment.chat_server import start_chat_server

    server = start_chat_server()
    yield server
    server.close()


def test_answers_that_give_nothing_to_search_are_counted_never_silent(weak_chat_server, tmp_path, monkeypatch):
    """An empty rewrite, a decomposition with no parts, an empty HyDE passage: the run stops (below the floor of
    usable answers); with allow_partial the text given is searched instead, and each is counted (plan.unusable,
    llm_query_<stage>_unusable_answers), apart from failed requests."""
    from kbench.datasets import load_dataset
    from kbench.config import DatasetConfig
    from kbench.llm import LLMPolicy, UsageMeter
    from kbench.llm.usable import UnusableAnswersError
    from kbench.retrieval.query.config import QueryConfig
    from kbench.retrieval.query.stage import plan_queries

    monkeypatch.setenv(KEY_ENV, "sk-test")
    queries = load_dataset(DatasetConfig(name="demo", max_queries=3)).queries
    endpoint = {"enabled": True, "base_url": weak_chat_server.base_url, "model": "weak", "api_key_env": KEY_ENV}
    weak_chat_server.reply = lambda prompt: "" if "search questions" in prompt else "  \n "  # nothing usable
    config = QueryConfig(expansion={**endpoint, "strategy": "llm"}, decomposition=endpoint, hyde=endpoint)
    # the batch stops once the floor cannot be met: after 2 or 3 answers, as the answers in flight arrive
    with pytest.raises(UnusableAnswersError, match=r"^query.expansion: 0 of (3|the first 2 \(of 3\)) answers usable "
                       r"\(([23]) unusable, 0 failed\) from model weak, below the floor of 80%.*disable query.expansion"):
        plan_queries(queries, config, tmp_path / "cache", meter=UsageMeter())
    meter, partial = UsageMeter(), LLMPolicy(allow_partial=True)
    plan = plan_queries(queries, config, tmp_path / "cache", meter=meter, policy=partial)
    assert plan.unusable == plan.failures == 3 * 3
    assert all(plan.searched[q.query_id] == [q.text] for q in queries)  # each stage fell back to its input
    metrics = meter.metrics()
    for stage in ("expansion", "decomposition", "hyde"):
        assert metrics[f"llm_query_{stage}_unusable_answers"] == 3 and metrics[f"llm_query_{stage}_failures"] == 0
        assert metrics[f"llm_query_{stage}_partial"] == 1  # went on below the floor: tagged on the run
    again = UsageMeter()  # cached answers are just as unusable: counted again, with no request
    assert plan_queries(queries, config, tmp_path / "cache", meter=again, policy=partial).unusable == 9
    assert again.metrics()["llm_total_unusable_answers"] == 9 and again.metrics()["llm_total_requests"] == 0
