"""ask_once_per_prompt (kbench/enrichment/asking.py), through the real client against the local chat server:
one request per distinct prompt, answers and errors keyed by prompt, the cache, the unusable count, a stop, and
the refusal when every request failed, and the floor of usable answers (kbench/llm/usable.py)."""
from __future__ import annotations

import pytest

from kbench.enrichment.asking import PromptAnswers, ask_once_per_prompt
from kbench.llm import Endpoint, LLMClient, LLMError, LLMPolicy, LLMStoppedError, UsageMeter
from kbench.llm.usable import UnusableAnswersError

KEY_ENV = "KBENCH_TEST_LLM_KEY"


class AllFailed(LLMError):
    pass


def all_failed(n: int, first: str) -> AllFailed:
    return AllFailed(f"all {n} failed; first: {first}")


def client_for(server, cache_root, meter: UsageMeter, **policy) -> LLMClient:
    """A client whose floor is 50% by default: these tests mix usable and unusable answers on purpose."""
    return LLMClient(Endpoint("enrichment.test", server.base_url, "m", KEY_ENV), stage="asking_test",
                     policy=LLMPolicy(**{"concurrency": 1, "min_usable": 0.5, **policy}), cache_root=cache_root,
                     meter=meter, cache_params={"purpose": "asking_test"})


def ask(client, prompts, **kwargs):
    return ask_once_per_prompt(client, prompts, **{"max_tokens": 7, "all_failed": all_failed,
                                                   "fix": "use another model", **kwargs})


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "local")


def test_each_distinct_prompt_is_asked_once_and_keyed_by_prompt(chat_server, tmp_path):
    prompts = ["say a", "say nothing", "say a", "refuse", "say b", "say nothing"]
    chat_server.reply = lambda prompt: {"say a": "A.", "say b": "  B. ", "say nothing": " \n"}.get(prompt, "Granted.")
    chat_server.status = lambda prompt: 400 if prompt == "refuse" else None
    meter = UsageMeter()
    asked = ask(client_for(chat_server, tmp_path, meter), prompts)
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
    again = ask(client_for(chat_server, tmp_path, meter), prompts,
                all_failed=lambda n, first: AllFailed("not expected"))
    assert len(chat_server.requests) == 5 and chat_server.prompts()[-1] == "refuse"
    assert (again.cache_hits, again.computed, again.empty, again.errors) == (3, 1, 1, {})
    assert again.failed_rows(prompts) == {}
    assert meter.metrics()["llm_asking_test_unusable_answers"] == 2  # the cached empty answer counts again


def test_every_request_failing_raises_the_callers_error(chat_server, tmp_path):
    chat_server.status = lambda prompt: 400
    with pytest.raises(AllFailed, match=r"^all 2 failed; first: enrichment.test: HTTP 400 .*refuses with HTTP 400"):
        ask(client_for(chat_server, tmp_path, UsageMeter()), ["one", "two", "one"], max_tokens=5)
    assert ask(client_for(chat_server, tmp_path, UsageMeter()), [], max_tokens=5) == PromptAnswers()  # nothing
    # to ask is not a failure


def test_a_stop_names_the_section_and_keeps_what_arrived(chat_server, tmp_path):
    chat_server.reply = lambda prompt: "" if prompt == "second" else "fine"
    chat_server.status = lambda prompt: 402 if prompt == "third" else None  # the quota runs out here
    meter = UsageMeter()
    with pytest.raises(LLMStoppedError, match=r"^enrichment.test: stopped after 2 of 4 answers \(.*quota"):
        ask(client_for(chat_server, tmp_path, meter), ["first", "second", "third", "fourth"], max_tokens=5)
    assert chat_server.prompts() == ["first", "second", "third"]  # nothing is sent after the stop
    assert meter.metrics()["llm_asking_test_unusable_answers"] == 1  # the empty answer arrived before the stop
    chat_server.status = None
    resumed = ask(client_for(chat_server, tmp_path, meter), ["first", "second", "third", "fourth"], max_tokens=5)
    assert (resumed.cache_hits, resumed.computed) == (2, 2)  # what arrived before the stop was cached


def test_too_few_usable_answers_stop_with_the_count_the_model_and_the_fix(chat_server, tmp_path, capsys):
    """Below llm.policy.min_usable (80%) the stage stops, early: 10 prompts allow 2 bad answers, so the third
    empty answer stops the batch and the rest are never sent."""
    chat_server.reply = lambda prompt: "" if prompt.startswith("blank") else "fine"
    prompts = [f"blank {i}" for i in range(3)] + [f"ok {i}" for i in range(7)]
    meter = UsageMeter()
    with pytest.raises(UnusableAnswersError) as raised:
        ask(client_for(chat_server, tmp_path, meter, min_usable=0.8), prompts)
    message = str(raised.value)
    assert message.startswith("enrichment.test: 0 of the first 3 (of 10) answers usable (3 unusable, 0 failed) "
                              "from model m, below the floor of 80% (llm.policy.min_usable); use another model")
    assert "--allow-partial" in message and "\n" not in message
    assert len(chat_server.requests) == 3  # stopped as soon as 80% could no longer be usable
    assert meter.metrics()["llm_asking_test_unusable_answers"] == 3
    progress = capsys.readouterr().err
    assert "enrichment.test (m): 10 to answer" in progress and "stopped early" in progress

    # allow_partial goes on: every prompt asked, a loud line on stderr, the stage marked partial in the meter
    partial = UsageMeter()
    asked = ask(client_for(chat_server, tmp_path, partial, min_usable=0.8, allow_partial=True), prompts)
    assert len(asked.answers) == 10 and asked.empty == 3
    err = capsys.readouterr().err
    assert "kbench: WARNING: enrichment.test: 7 of 10 answers usable (3 unusable, 0 failed)" in err
    assert partial.metrics()["llm_asking_test_partial"] == 1
    # at the floor exactly: no stop, no warning
    assert len(ask(client_for(chat_server, tmp_path, UsageMeter(), min_usable=0.7), prompts).answers) == 10
    assert "WARNING" not in capsys.readouterr().err
