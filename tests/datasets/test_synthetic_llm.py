"""The llm method against the deterministic OpenAI-compatible test server: prompts, parsing, quote location
(exact, loose, fuzzy, not found), rejections counted, answers cached on a re-run."""
from __future__ import annotations

import json
import re

import pytest

from kbench.datasets.spans import load_kbench_spans
from kbench.datasets.synthetic import LLMOptions, build_from_source
from kbench.datasets.synthetic.llm import PROMPT_SHA256, locate, parse_answer
from tests.enrichment import chat_server

SENTENCE = re.compile(r"[A-Z][^.!?\n]{30,}[.!?]")


def question_writer(prompt: str) -> str:
    """A stand-in model (no chat model runs offline fast enough for a test): quotes the excerpt's first long
    sentence, damaged in one of four ways chosen by the excerpt's length, so every path is exercised."""
    if not prompt.startswith("You write evaluation questions"):
        return chat_server.answer(prompt)
    excerpt = prompt.split("<excerpt>\n", 1)[1].split("\n</excerpt>", 1)[0]
    found = SENTENCE.search(excerpt)
    if not found:
        return "I cannot."
    quote = found.group(0)
    words = quote.split()
    kind = len(excerpt) % 4
    if kind == 1:  # whitespace and case changed: a loose match
        quote = "  ".join(words).upper().lower()
    elif kind == 2:  # one word misspelt: a fuzzy match
        quote = " ".join(words[:3] + [words[3][::-1]] + words[4:]) if len(words) > 5 else quote
    elif kind == 3 and len(excerpt) % 8 == 3:  # a quote that is not in the excerpt at all
        quote = "The moon is made of green cheese and nobody noticed until today."
    return f"Question: What is said about {' '.join(words[1:4]).lower()}?\nQuote: {quote}"


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setattr(chat_server, "answer", question_writer)
    monkeypatch.setenv("KBENCH_TEST_KEY", "local-secret")
    state = chat_server.start_chat_server()
    yield state
    state.close()


def test_llm_set_from_the_demo_docs(tmp_path, server):
    from tests.conftest import DEMO

    options = LLMOptions(server.base_url, "test-model", "KBENCH_TEST_KEY", str(tmp_path / "ws"), timeout_s=30.0,
                         concurrency=1)  # the policy a CPU-served model needs (benchmarks/synthetic_agreement.py)
    report = build_from_source(str(DEMO / "docs"), tmp_path / "set", method="llm", max_questions=40, seed=3,
                               llm_options=options)
    assert len(server.requests) == 40 and server.requests[0]["authorization"] == "Bearer local-secret"
    assert report.cache == {"hits": 0, "requests": 40, **{k: v for k, v in report.cache.items() if "located" in k}}
    located = {k: v for k, v in report.cache.items() if k.startswith("located_")}
    assert set(located) >= {"located_exact", "located_loose", "located_fuzzy"}
    assert report.rejected["quote_not_located"] >= 1
    assert report.kept + report.rejected["quote_not_located"] + report.rejected["answer_not_parsed"] + \
        report.rejected["quote_too_short"] + report.rejected["near_duplicate_question"] == 40
    dataset = load_kbench_spans(tmp_path / "set")  # every located span matches the document
    assert len(dataset.queries) == report.kept
    manifest = json.loads((tmp_path / "set" / "manifest.json").read_text())
    assert manifest["model"] == "test-model" and manifest["prompt_sha256"] == PROMPT_SHA256
    assert "local-secret" not in (tmp_path / "set" / "manifest.json").read_text()

    again = build_from_source(str(DEMO / "docs"), tmp_path / "set2", method="llm", max_questions=40, seed=3,
                              llm_options=options)
    assert len(server.requests) == 40 and again.cache["hits"] == 40  # every answer came from the cache
    assert (tmp_path / "set" / "questions.jsonl").read_text() == (tmp_path / "set2" / "questions.jsonl").read_text()


def test_parse_and_locate_by_hand():
    assert parse_answer("Question: Why?\nQuote: Because it is.") == ("Why?", "Because it is.")
    assert parse_answer('```json\n{"question": "Why?", "quote": "It is."}\n```') == ("Why?", "It is.")
    assert parse_answer("**Question:** Why so?\n**Quote:** \"It is so.\"") == ("Why so?", "It is so.")
    assert parse_answer("no idea") is None
    text = "Intro.\n\nLumen guarantees **at-least-once** delivery. A job may\nrun twice."
    assert locate("Lumen guarantees **at-least-once** delivery.", text, 0, len(text), 85)[2] == "exact"
    start, end, how = locate("lumen guarantees at-least-once delivery. a job may run twice.", text, 0, len(text), 85)
    assert how == "loose" and text[start:end] == text[8:]
    start, end, how = locate("Lumen guaranties at-least-once delivery", text, 0, len(text), 85)
    assert how == "fuzzy" and text[start:end].startswith("Lumen guarantees")
    assert locate("Something else entirely that is absent.", text, 0, len(text), 85) is None


def test_a_missing_endpoint_is_one_message_before_any_work(tmp_path, monkeypatch, capsys):
    from kbench.cli import main as kbench_main
    from tests.conftest import DEMO

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(SystemExit) as exit_info:
        kbench_main(["datasets", "build", "synthetic", str(DEMO / "docs"), "--method", "llm", "--out",
                     str(tmp_path / "out"), "--model", "m"])
    assert exit_info.value.code == 2 and "base_url" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_the_documented_recipe_runs_as_written(tmp_path, server):
    """docs/how-to/evaluation-sets.md's `--method llm` block, as a reader runs it, with this test endpoint in place of
    `kbench serve` (SmolLM2 is minutes on a CI machine): the key variable the recipe names is the one the page
    exports (the recipe once took OPENAI_API_KEY's default while kbench serve's section exported KBENCH_LOCAL_KEY)."""
    import os
    import subprocess

    from kbench.paths import REPO_ROOT
    from tests.docs.blocks import shell_blocks

    block = next(b for b in shell_blocks(REPO_ROOT / "docs" / "how-to" / "evaluation-sets.md")
                 if "--method llm" in b.code)
    lines = [line for line in block.code.replace("http://127.0.0.1:8000/v1", server.base_url).splitlines()
             if not line.startswith("kbench serve")]
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "KBENCH_LOCAL_KEY", "KBENCH_WORKSPACE")}
    env.update(PATH=f"{REPO_ROOT / '.venv' / 'bin'}{os.pathsep}{env['PATH']}", PYTHONPATH=str(REPO_ROOT))
    done = subprocess.run(["bash", "-c", "set -euo pipefail\n" + "\n".join(lines)], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert server.requests and all(r["authorization"] == "Bearer local" for r in server.requests)
    assert (tmp_path / "sets" / "demo-llm" / "questions.jsonl").read_text().strip()
