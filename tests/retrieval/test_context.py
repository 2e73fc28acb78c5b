"""Context assembly: overlapping chunks dropped, the token budget kept in production order, headers counted,
and the assembled context scored beside the raw top-k on a real run."""
from __future__ import annotations

import pytest

from kbench.config import load_experiment
from kbench.pipeline import run_pipeline
from kbench.records import Document, RankedHit
from kbench.retrieval.context import ContextConfig, assemble, token_counter


def hit(chunk_id: str, doc_id: str, start: int, end: int) -> RankedHit:
    return RankedHit(chunk_id, doc_id, 1.0, start, end, {}, {}, "")


def words(text: str) -> int:
    return len(text.split())


def test_overlapping_chunks_are_dropped_and_packing_stops_at_the_budget():
    hits = [hit("a", "d1", 0, 100), hit("b", "d1", 50, 150), hit("c", "d2", 0, 100), hit("d", "d1", 100, 200),
            hit("e", "d3", 0, 10)]
    texts = {"a": "one two three", "b": "overlaps a", "c": "four five six seven", "d": "eight nine", "e": "ten"}
    out = assemble(hits, texts, {}, ContextConfig(max_context_tokens=8), words)
    assert [h.chunk_id for h in out.hits] == ["a", "c"]  # b overlaps a; d would make 7 + 2 > 8 words
    assert out.dropped_overlap == 1 and out.dropped_budget == 2 and out.tokens == 7
    assert out.text == "one two three\n\nfour five six seven"
    loose = assemble(hits, texts, {}, ContextConfig(max_context_tokens=100, drop_overlapping=False), words)
    assert [h.chunk_id for h in loose.hits] == ["a", "b", "c", "d", "e"]


def test_metadata_headers_are_part_of_the_text_and_the_count():
    documents = {"d1": Document("d1", "x", title="Retries")}
    out = assemble([hit("a", "d1", 0, 5)], {"a": "body text"}, documents, ContextConfig(include_metadata=True),
                   token_counter("all-MiniLM-L6-v2"))
    assert out.text == "[source: d1 Retries]\nbody text"
    assert out.tokens == token_counter("all-MiniLM-L6-v2")(out.text)


def test_a_run_scores_the_assembled_context_and_logs_its_tokens(config_for):
    config = config_for(dataset={"name": "demo", "max_queries": 15}, retrieval={"legs": ["bm25"], "top_k": 20},
                        chunking={"strategy": "fixed", "chunk_size": 600, "chunk_overlap": 200},
                        context={"enabled": True, "max_context_tokens": 400, "include_metadata": True})
    result = run_pipeline(load_experiment(config), progress=False)
    frame = result.per_query
    assert (frame["context_tokens"] <= 400).all() and (frame["context_tokens"] > 0).all()
    assert (frame["context_chunks"] < frame["n_results"]).all()  # 400 tokens hold a few 600-char chunks
    assert frame["context_dropped_overlap"].sum() > 0  # 200-char overlaps between neighbours
    for k in (1, 5, 10):
        assert result.metrics[f"context_doc_recall_at_{k}"] <= result.metrics[f"doc_recall_at_{k}"] + 1e-12
    assert result.metrics["context_tokens"] == pytest.approx(frame["context_tokens"].mean())
    assert "context_span_recall_at_5" in result.metrics or "context_chunk_recall_at_5" in result.metrics
