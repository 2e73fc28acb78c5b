"""The code-example index (kbench/enrichment/code_examples.py): the Archon replication guide's extraction rule with its quirks,
offsets exact against the page text, summaries through the LLM client (cached), and the config's refusals."""
from __future__ import annotations

import re

import pytest
import yaml

from kbench.cli import main
from kbench.config import CodeExamplesConfig, ConfigError, DatasetConfig, load_experiment
from kbench.datasets import load_dataset
from kbench.enrichment import (CODE_EXAMPLE_UNIT, build_code_examples, embedded_text, extract_code_examples,
                               summary_prompt)
from kbench.llm.usable import UnusableAnswersError
from kbench.llm import LLMPolicy, LLMStoppedError, UsageMeter
from kbench.records import Document
from tests.enrichment.chat_server import start_chat_server

KEY_ENV = "KBENCH_TEST_LLM_KEY"


def archon_guide(markdown: str) -> list[tuple[str, str]]:
    """The Archon replication guide's extract_code_blocks, written out here: (language, code) of each block over 250 chars."""
    return [(language or "unknown", code) for language, code in re.findall(r"```(\w+)?\n(.*?)\n```", markdown, re.DOTALL)
            if len(code) > 250]


@pytest.fixture(scope="module")
def demo():
    return load_dataset(DatasetConfig(name="demo"))


def test_demo_blocks_match_archon_guide_with_exact_offsets(demo):
    units = extract_code_examples(demo.documents)
    assert len(units) == 20  # the demo's fenced blocks over 250 characters
    by_doc = {d.doc_id: d for d in demo.documents}
    for document in demo.documents:
        mine = [u for u in units if u.doc_id == document.doc_id]
        assert [(u.metadata["language"], u.text) for u in mine] == archon_guide(document.text)
        assert [u.chunk_number for u in mine] == list(range(len(mine)))
    for unit in units:
        text = by_doc[unit.doc_id].text
        assert text[unit.start:unit.end] == unit.text and unit.unit == CODE_EXAMPLE_UNIT
        assert text[unit.metadata["fence_start"]:unit.start].startswith("```")
        assert text[unit.end:unit.metadata["fence_end"]] == "\n```"
        assert unit.chunk_id == f"{unit.doc_id}#code_example:{unit.chunk_number}"
    assert {u.metadata["language"] for u in units} == {"json", "bash", "python", "yaml"}


def test_production_quirks_are_kept():
    code = "x = 1\n" * 50  # 300 characters
    text = (f"# Page\n```python title=\"a.py\"\n{code}\n```\nprose between the blocks, " + "words " * 50 +
            f"\n```\n\n~~~python\n{code}\n~~~\n```c++\n{code}\n```\n```\n{code[:250]}\n```\n")
    units = extract_code_examples([Document("p", text)])
    assert [(u.metadata["language"], u.text) for u in units] == archon_guide(text)
    # the multi-word fence does not open a block: its closing fence opens one over the prose instead
    assert units[0].text.startswith("prose between the blocks") and units[0].metadata["language"] == "unknown"
    assert not any(u.text == code.rstrip("\n") and u.metadata["language"] == "python" for u in units)
    assert all(text[u.start:u.end] == u.text for u in units)
    assert extract_code_examples([Document("p", text)], min_code_chars=10_000) == []


def test_summaries_through_the_client_are_cached(demo, chat_server, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "local")
    documents = [d for d in demo.documents if d.doc_id.startswith("api/")]
    config = CodeExamplesConfig(enabled=True, base_url=chat_server.base_url, model="summarizer", api_key_env=KEY_ENV)
    first = build_code_examples(documents, config, tmp_path / "cache")
    assert first.counts() == {"code_examples": 6, "code_examples_summaries_cached": 0,
                              "code_examples_summaries_computed": 6, "code_examples_summaries_failed": 0,
                              "code_examples_summaries_empty": 0}
    assert len(chat_server.requests) == 6
    for unit, text in zip(first.units, first.texts):
        first_line = next(ln.strip() for ln in unit.text.splitlines() if ln.strip())
        assert unit.metadata["summary"] == f"A {unit.metadata['language']} example: {first_line}"
        assert text == embedded_text(unit.text, unit.metadata["summary"]) == unit.text + "\n\nSummary: " + \
            unit.metadata["summary"]
    by_doc = {d.doc_id: d for d in documents}
    assert sorted(chat_server.prompts()) == sorted(summary_prompt(u, by_doc[u.doc_id].text, config) for u in first.units)
    again = build_code_examples(documents, config, tmp_path / "cache")
    assert len(chat_server.requests) == 6 and again.counts()["code_examples_summaries_cached"] == 6
    assert again.texts == first.texts


def test_an_empty_summary_keeps_the_code_alone_and_is_counted_unusable(demo, chat_server, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "local")
    chat_server.reply = lambda prompt: "  \n"  # what a weak model sometimes answers
    documents = [d for d in demo.documents if d.doc_id.startswith("api/")]
    config = CodeExamplesConfig(enabled=True, base_url=chat_server.base_url, model="terse", api_key_env=KEY_ENV,
                                concurrency=1)  # one at a time: the stop comes at the second answer exactly
    meter = UsageMeter()
    with pytest.raises(UnusableAnswersError, match=r"^enrichment.code_examples: 0 of the first 2 \(of 6\) answers "
                       r"usable \(2 unusable, 0 failed\) from model terse, below the floor of 80%.*summary: none"):
        build_code_examples(documents, config, tmp_path / "cache", meter=meter)
    # kept going on purpose (allow_partial): the code alone is embedded, every empty answer counted
    built = build_code_examples(documents, config, tmp_path / "cache", meter=meter,
                                policy=LLMPolicy(allow_partial=True))
    assert built.texts == [u.text for u in built.units] and all(u.metadata["summary"] is None for u in built.units)
    assert built.counts()["code_examples_summaries_empty"] == 6 and not built.failed
    assert meter.metrics({})["llm_code_examples_unusable_answers"] == 2 + 6
    assert meter.metrics({})["llm_code_examples_partial"] == 1


def test_context_chars_shows_the_page_around_the_fences(demo):
    unit = extract_code_examples(demo.documents)[0]
    text = next(d for d in demo.documents if d.doc_id == unit.doc_id).text
    plain = summary_prompt(unit, text, CodeExamplesConfig())
    assert plain.endswith(f"```{unit.metadata['language']}\n{unit.text}\n```")
    around = summary_prompt(unit, text, CodeExamplesConfig(context_chars=80))
    before = text[unit.metadata["fence_start"] - 80:unit.metadata["fence_start"]]
    after = text[unit.metadata["fence_end"]:unit.metadata["fence_end"] + 80]
    assert f"{before}```{unit.metadata['language']}\n{unit.text}\n```{after}" in around


def test_an_unreachable_endpoint_stops_at_once_naming_the_knob(demo, tmp_path, monkeypatch):
    server = start_chat_server()
    server.close()  # nothing answers at this port any more
    monkeypatch.setenv(KEY_ENV, "local")
    config = CodeExamplesConfig(enabled=True, base_url=server.base_url, model="m", api_key_env=KEY_ENV)
    with pytest.raises(LLMStoppedError) as e:
        build_code_examples(demo.documents[:12], config, tmp_path / "cache")
    assert "enrichment.code_examples.base_url" in str(e.value) and "stopped after 0 of" in str(e.value)


def test_enabled_without_endpoint_exits_2_before_any_work(workspace, config_for, monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv(KEY_ENV, raising=False)
    config = config_for(enrichment={"code_examples": {"enabled": True, "api_key_env": KEY_ENV}},
                        retrieval={"legs": ["code_examples"], "top_k": 10})
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    with pytest.raises(SystemExit) as info:
        main(["run", str(tmp_path / "bad.yaml"), "--quiet"])
    assert info.value.code == 2
    message = capsys.readouterr().err
    for piece in ("enrichment.code_examples.base_url", "enrichment.code_examples.model", KEY_ENV):
        assert piece in message
    assert "Traceback" not in message and not (workspace / "runs").exists()


@pytest.mark.parametrize("sections, message", [
    ({"retrieval": {"legs": ["code_examples"]}}, "set enrichment.code_examples.enabled: true"),
    ({"enrichment": {"code_examples": {"enabled": True, "summary": "none"}}}, "no leg searches the code-example"),
    ({"enrichment": {"code_examples": {"enabled": True, "summary": "none"}},
      "retrieval": {"legs": ["code_examples"], "leg_params": {"code_examples": {"unit": "document"}}}},
     "always searches code_example units"),
])
def test_inconsistent_configs_are_refused(config_for, sections, message):
    with pytest.raises(ConfigError) as e:
        load_experiment(config_for(**sections))
    assert message in str(e.value)


def test_run_key_is_unchanged_while_the_index_is_off(config_for):
    plain = load_experiment(config_for())
    payload = plain.run_key_payload()
    assert "code_examples" not in payload["enrichment"]
    on = load_experiment(config_for(enrichment={"code_examples": {"enabled": True, "summary": "none"}},
                                    retrieval={"legs": ["code_examples"]}))
    assert on.run_key_payload()["enrichment"]["code_examples"]["enabled"] is True
