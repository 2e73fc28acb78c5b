"""Contextual enrichment: the Archon replication guide's prompt, the cache, the run integration, and the key kept secret."""
from __future__ import annotations

from pathlib import Path

import pytest

from kbench.chunking import chunk_corpus
from kbench.config import ChunkingConfig, ConfigError, DatasetConfig, EmbeddingConfig, EnrichmentConfig, load_experiment
from kbench.datasets import load_dataset
from kbench.embedding.stage import CachedEmbedder
from kbench.enrichment import EnrichmentError, context_prompt, contextual_text, enrich_chunks
from kbench.hashing import sha256_text
from kbench.llm import LLMStoppedError
from kbench.runner import run_experiment
from tests.enrichment.chat_server import situate

SECRET = "sk-kbench-test-9f8e7d6c5b4a-do-not-log"
KEY_ENV = "KBENCH_TEST_LLM_KEY"


@pytest.fixture(scope="module")
def demo_sample():
    dataset = load_dataset(DatasetConfig(name="demo", max_queries=2, max_documents=3))
    chunks = chunk_corpus(dataset.documents, ChunkingConfig(strategy="fixed", chunk_size=600, chunk_overlap=100))
    return dataset, chunks


def test_prompt_is_archon_guides_with_the_document_prefix(demo_sample):
    dataset, chunks = demo_sample
    chunk = chunks[1]
    document = next(d for d in dataset.documents if d.doc_id == chunk.doc_id)
    prompt = context_prompt(document.text, chunk.text, document_chars=300)
    assert prompt == (f"<document>\n{document.text[:300]}\n</document>\n<chunk>\n{chunk.text}\n</chunk>\n"
                      "Please provide a short context to situate this chunk within the document.")
    assert contextual_text("It is about retries.", chunk.text) == "It is about retries.\n---\n" + chunk.text


def test_enabled_without_endpoint_fails_before_any_work(workspace, config_for, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv(KEY_ENV, raising=False)
    experiment = load_experiment(config_for(enrichment={"enabled": True, "api_key_env": KEY_ENV}))
    with pytest.raises(ConfigError) as e:
        run_experiment(experiment, progress=False)
    message = str(e.value)
    assert "enrichment.base_url" in message and "enrichment.model" in message and KEY_ENV in message
    assert not (workspace / "runs").exists()  # nothing was loaded, embedded or written


def test_answers_are_cached_by_prompt_and_never_asked_twice(demo_sample, chat_server, tmp_path, monkeypatch):
    dataset, chunks = demo_sample
    monkeypatch.setenv(KEY_ENV, SECRET)
    config = EnrichmentConfig(enabled=True, base_url=chat_server.base_url, model="situator", api_key_env=KEY_ENV,
                              concurrency=3)
    first = enrich_chunks(chunks, dataset.documents, config, tmp_path / "cache")
    docs = {d.doc_id: d for d in dataset.documents}
    assert first.computed == len({context_prompt(docs[c.doc_id].text, c.text) for c in chunks})
    assert len(chat_server.requests) == first.computed and first.cache_hits == 0 and not first.failed
    for chunk, text, context in zip(chunks, first.texts, first.contexts):
        title = next(d for d in dataset.documents if d.doc_id == chunk.doc_id).text.splitlines()[0].lstrip("# ")
        assert context == f"This chunk is from the document '{title}'."
        assert text == f"{context}\n---\n{chunk.text}"
    assert {r["authorization"] for r in chat_server.requests} == {f"Bearer {SECRET}"}
    assert {r["max_tokens"] for r in chat_server.requests} == {200}

    second = enrich_chunks(chunks, dataset.documents, config, tmp_path / "cache")
    assert len(chat_server.requests) == first.computed  # no new request
    assert second.cache_hits == first.computed and second.computed == 0 and second.texts == first.texts

    other_model = config.model_copy(update={"model": "another-model"})
    enrich_chunks(chunks[:1], dataset.documents, other_model, tmp_path / "cache")
    assert len(chat_server.requests) == first.computed + 1  # the model is part of the cache key
    for f in (tmp_path / "cache").rglob("*"):
        if f.is_file():
            assert SECRET not in f.read_text(encoding="utf-8")


def test_an_endpoint_refusing_connections_stops_the_run_naming_base_url(demo_sample, tmp_path, monkeypatch):
    dataset, chunks = demo_sample
    monkeypatch.setenv(KEY_ENV, SECRET)
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = EnrichmentConfig(enabled=True, base_url=f"http://127.0.0.1:{port}/v1", model="m", api_key_env=KEY_ENV)
    with pytest.raises(LLMStoppedError, match=f"cannot connect to http://127.0.0.1:{port}/v1") as e:
        enrich_chunks(chunks[:2], dataset.documents, config, tmp_path / "cache")
    assert "enrichment.base_url" in str(e.value) and "stopped after 0 of 2" in str(e.value)
    assert SECRET not in str(e.value)


@pytest.mark.slow  # two real runs with MLflow logging
def test_run_embeds_enriched_text_and_the_key_never_reaches_mlflow(workspace, config_for, chat_server,
                                                                   monkeypatch, capsys, caplog):
    monkeypatch.setenv(KEY_ENV, SECRET)
    config = config_for(
        dataset={"name": "demo", "max_queries": 3, "max_documents": 3},
        enrichment={"enabled": True, "base_url": chat_server.base_url, "model": "situator", "api_key_env": KEY_ENV},
    )
    result = run_experiment(load_experiment(config), progress=False)
    n_chunks = result.counts["chunks"]
    assert result.counts["enrichment_computed"] == len(chat_server.requests) > 0
    assert result.counts["enrichment_failed"] == 0
    assert result.metrics["count_enrichment_computed"] == len(chat_server.requests)
    assert 0 <= result.metrics["chunk_ndcg_at_10"] <= 1  # evaluated as usual

    # the vectors indexed are those of the enriched texts (the embedding cache is keyed by the text's hash)
    cache = CachedEmbedder(EmbeddingConfig(), workspace / "cache").cache
    docs = {d.doc_id: d for d in result.dataset.documents}
    enriched = [contextual_text(situate(context_prompt(docs[c.doc_id].text, c.text)), c.text) for c in result.chunks]
    assert len(cache.get_many([sha256_text(t) for t in enriched])) == len(set(enriched)) == n_chunks

    # a second run asks nothing
    asked = len(chat_server.requests)
    again = run_experiment(load_experiment(config), progress=False)
    assert len(chat_server.requests) == asked and again.counts["enrichment_cached"] == asked

    # the key: only the env var's name is in the config; never in params, artifacts or output
    from mlflow.tracking import MlflowClient

    client = MlflowClient(result.tracking_uri)
    run = client.get_run(result.run_id)
    assert run.data.params["enrichment.api_key_env"] == KEY_ENV
    assert all(SECRET not in v for v in run.data.params.values())
    assert all(SECRET not in v for v in run.data.tags.values())
    artifact_root = Path(run.info.artifact_uri.removeprefix("file://"))
    files = [p for p in list(artifact_root.rglob("*")) + list(result.run_dir.rglob("*")) if p.is_file()]
    assert files
    for f in files:
        assert SECRET.encode() not in f.read_bytes(), f
    out = capsys.readouterr()
    assert SECRET not in out.out + out.err + caplog.text


def test_an_empty_context_is_embedded_as_production_does_and_counted(demo_sample, chat_server, tmp_path,
                                                                   monkeypatch):
    from kbench.llm import LLMPolicy, UsageMeter

    dataset, chunks = demo_sample
    monkeypatch.setenv(KEY_ENV, SECRET)
    chat_server.reply = lambda prompt: "" if f"<chunk>\n{chunks[0].text}\n</chunk>" in prompt else situate(prompt)
    config = EnrichmentConfig(enabled=True, base_url=chat_server.base_url, model="weak", api_key_env=KEY_ENV)
    meter = UsageMeter()
    result = enrich_chunks(chunks[:3], dataset.documents, config, tmp_path / "cache", meter=meter,
                           policy=LLMPolicy(min_usable=0.6))  # 2 of 3 usable: above this floor
    assert result.texts[0] == "\n---\n" + chunks[0].text and result.contexts[0] == ""
    assert result.counts()["enrichment_empty"] == 1 and not result.failed
    assert meter.metrics()["llm_enrichment_unusable_answers"] == 1
