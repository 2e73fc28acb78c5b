"""ask_once_per_prompt (kbench/enrichment/asking.py), through the real client against the local chat server:
one request per distinct prompt, answers and errors keyed by prompt, the cache, the unusable count, a stop, and
the refusal when every request failed."""
from __future__ import annotations

import pytest

from kbench.enrichment.asking import PromptAnswers, ask_once_per_prompt
from kbench.llm import Endpoint, LLMClient, LLMError, LLMPolicy, LLMStoppedError, UsageMeter

KEY_ENV = "KBENCH_TEST_LLM_KEY"


class AllFailed(LLMError):
    pass


def all_failed(n: int, first: str) -> AllFailed:
    return AllFailed(f"all {n} failed; first: {first}")


def client_for(server, cache_root, meter: UsageMeter) -> LLMClient:
    return LLMClient(Endpoint("enrichment.test", server.base_url, "m", KEY_ENV), stage="asking_test",
                     policy=LLMPolicy(concurrency=1), cache_root=cache_root, meter=meter,
                     cache_params={"purpose": "asking_test"})


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "local")


def test_each_distinct_prompt_is_asked_once_and_keyed_by_prompt(chat_server, tmp_path):
    prompts = ["say a", "say nothing", "say a", "refuse", "say b", "say nothing"]
    chat_server.reply = lambda prompt: {"say a": "A.", "say b": "  B. ", "say nothing": " \n"}.get(prompt, "Granted.")
    chat_server.status = lambda prompt: 400 if prompt == "refuse" else None
    meter = UsageMeter()
    asked = ask_once_per_prompt(client_for(chat_server, tmp_path, meter), prompts, max_tokens=7,
                                all_failed=all_failed)
    assert sorted(chat_server.prompts()) == ["refuse", "say a", "say b", "say nothing"]  # once each
    assert {r["max_tokens"] for r in chat_server.requests} == {7}
    # answers as the client returns them (it strips the wire text); what they mean is the caller's business
    assert asked.answers == {"say a": "A.", "say nothing": "", "say b": "B."}
    assert list(asked.errors) == ["refuse"] and "HTTP 400" in asked.errors["refuse"]
    assert (asked.cache_hits, asked.computed, asked.empty) == (0, 3, 1)
    assert asked.failed_rows(prompts) == {3: asked.errors["refuse"]}
    usage = meter.metrics()
    assert usage["llm_asking_test_requests"] == 4 and usage["llm_asking_test_failures"] == 1
    assert usage["llm_asking_test_unusable_answers"] == 1

    chat_server.status = None  # the refused prompt is asked again (failures are not cached); the rest are not
    again = ask_once_per_prompt(client_for(chat_server, tmp_path, meter), prompts, max_tokens=7,
                                all_failed=lambda n, first: AllFailed("not expected"))
    assert len(chat_server.requests) == 5 and chat_server.prompts()[-1] == "refuse"
    assert (again.cache_hits, again.computed, again.empty, again.errors) == (3, 1, 1, {})
    assert again.failed_rows(prompts) == {}
    assert meter.metrics()["llm_asking_test_unusable_answers"] == 2  # the cached empty answer counts again


def test_every_request_failing_raises_the_callers_error(chat_server, tmp_path):
    chat_server.status = lambda prompt: 400
    with pytest.raises(AllFailed, match=r"^all 2 failed; first: enrichment.test: HTTP 400 .*refuses with HTTP 400"):
        ask_once_per_prompt(client_for(chat_server, tmp_path, UsageMeter()), ["one", "two", "one"], max_tokens=5,
                            all_failed=all_failed)
    assert ask_once_per_prompt(client_for(chat_server, tmp_path, UsageMeter()), [], max_tokens=5,
                               all_failed=all_failed) == PromptAnswers()  # nothing to ask is not a failure


def test_a_stop_names_the_section_and_keeps_what_arrived(chat_server, tmp_path):
    chat_server.reply = lambda prompt: "" if prompt == "second" else "fine"
    chat_server.status = lambda prompt: 402 if prompt == "third" else None  # the quota runs out here
    meter = UsageMeter()
    with pytest.raises(LLMStoppedError, match=r"^enrichment.test: stopped after 2 of 4 answers \(.*quota"):
        ask_once_per_prompt(client_for(chat_server, tmp_path, meter), ["first", "second", "third", "fourth"],
                            max_tokens=5, all_failed=all_failed)
    assert chat_server.prompts() == ["first", "second", "third"]  # nothing is sent after the stop
    assert meter.metrics()["llm_asking_test_unusable_answers"] == 1  # the empty answer arrived before the stop
    chat_server.status = None
    resumed = ask_once_per_prompt(client_for(chat_server, tmp_path, meter), ["first", "second", "third", "fourth"],
                                  max_tokens=5, all_failed=all_failed)
    assert (resumed.cache_hits, resumed.computed) == (2, 2)  # what arrived before the stop was cached
