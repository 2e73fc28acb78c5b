"""The search stage on real data: per-query stage latency, batch mode, filters applied to every leg,
grouping, the 'similar' search type, and the mode configs under configs/retrieval/."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from kbench.config import EmbeddingConfig, RetrievalConfig, load_experiment
from kbench.embedding.stage import CachedEmbedder
from kbench.paths import REPO_ROOT
from kbench.records import Query
from kbench.retrieval.filters import filter_mask
from kbench.retrieval.stage import SearchError, search
from tests.retrieval.leg_outputs import demo_legs

MODE_CONFIGS = ["vector", "archon_hybrid", "archon_weighted", "weighted", "rrf", "rrf_supabase"]


@pytest.fixture(scope="module")
def demo(shared_cache_workspace):
    legs = demo_legs(str(shared_cache_workspace))
    return legs, legs.dataset.queries[:12]


def retrieval(**values) -> RetrievalConfig:
    """Batch latency unless a test sets it: one query at a time is what latency tests are about."""
    return RetrievalConfig(**{"latency": "batch", **values})


def test_per_query_latency_is_measured_per_query_and_stage(demo):
    legs, queries = demo
    out = search(queries, legs.context, retrieval(legs=["vector", "bm25"], fusion={"strategy": "rrf"}, top_k=10,
                                                  latency="per_query"), documents=legs.dataset.documents)
    assert set(out.latency_ms) == {"embed_query", "leg_vector", "leg_bm25", "fusion", "total"}
    for stage, values in out.latency_ms.items():
        assert values.shape == (len(queries),) and (values > 0).all(), stage
    assert len(set(np.round(out.latency_ms["embed_query"], 6))) > 1  # measured, not one batch time spread evenly
    parts = sum(v for k, v in out.latency_ms.items() if k != "total")
    assert np.allclose(out.latency_ms["total"], parts)
    assert all(len(hits) == 10 for hits in out.rankings.values())


def test_batch_mode_amortizes_and_ranks_the_same(demo):
    legs, queries = demo
    config = dict(legs=["vector", "bm25"], fusion={"strategy": "weighted", "weight": 0.7}, top_k=10)
    per_query = search(queries, legs.context, retrieval(**config, latency="per_query"))
    batch = search(queries, legs.context, retrieval(**config))
    assert len(set(batch.latency_ms["embed_query"])) == 1  # one batch time / queries
    same = sum([h.chunk_index for h in per_query.rankings[q.query_id]] ==
               [h.chunk_index for h in batch.rankings[q.query_id]] for q in queries)
    assert same >= len(queries) - 1  # one query at a time vs a batch: equal up to float noise in near ties


def test_batch_latency_times_query_encoding_apart_from_the_vector_cache(demo, tmp_path, monkeypatch):
    """Under latency: batch the query vectors come through the vector cache, so a sweep's first vector config
    computed them and the next read them; embed_query is timed apart (the encoder itself, never the cache), so
    both configs' latencies are measured the same way."""
    legs, queries = demo
    embedder = CachedEmbedder(EmbeddingConfig(), tmp_path / "cache")  # a cache of its own: nothing cached yet
    encoded: list[int] = []
    encode = embedder.encoder.encode
    monkeypatch.setattr(embedder.encoder, "encode",
                        lambda texts, **kw: encoded.append(len(texts)) or encode(texts, **kw))
    timed: list[float] = []

    def time_queries(texts: list[str]) -> float | None:
        timed.append(embedder.time_queries(texts))
        return timed[-1]

    context = replace(legs.context, embed_queries=embedder.embed_queries, time_queries=time_queries)
    config = retrieval(legs=["vector"], top_k=10)
    first = search(queries, context, config)  # the questions embedded (and cached) by this search
    encoded.clear()
    second = search(queries, context, config)  # an equal config after it: its vectors come from the cache
    assert encoded == [1, len(queries)]  # yet the encoder ran: one untimed warm-up, then the timed questions
    for out, seconds in zip((first, second), timed):
        assert np.array_equal(out.latency_ms["embed_query"], np.full(len(queries), seconds * 1000))
    assert all(t > 0 for t in timed)
    assert all([h.chunk_index for h in first.rankings[q.query_id]]
               == [h.chunk_index for h in second.rankings[q.query_id]] for q in queries)  # the same vectors either way
    assert search(queries, replace(context, time_queries=None), config).latency_ms["embed_query"][0] > 0


def test_filters_reach_every_leg(demo):
    legs, queries = demo
    config = retrieval(legs=["vector", "bm25"], fusion={"strategy": "rrf"}, top_k=20, candidates_per_leg=40,
                       filters={"doc_types": ["code"]})
    mask = filter_mask(legs.chunks, {d.doc_id: d for d in legs.dataset.documents}, config.filters)
    out = search(queries, legs.context, config, documents=legs.dataset.documents)
    found = {leg: 0 for leg in config.legs}
    for hits in out.rankings.values():
        for h in hits:
            assert mask[h.chunk_index]
            for leg in h.leg_ranks:
                found[leg] += 1
    assert all(n > 0 for n in found.values()), found  # both legs contributed, both under the mask
    unfiltered = search(queries, legs.context, retrieval(legs=["vector", "bm25"], fusion={"strategy": "rrf"}, top_k=20))
    assert any(not mask[h.chunk_index] for hits in unfiltered.rankings.values() for h in hits)


def test_a_filter_that_keeps_nothing_fails_before_searching(demo):
    legs, queries = demo
    with pytest.raises(SearchError, match="keep none"):
        search(queries, legs.context, retrieval(filters={"doc_types": ["pr", "commit"]}),
               documents=legs.dataset.documents)


def test_grouping_returns_one_hit_per_document(demo):
    legs, queries = demo
    out = search(queries, legs.context, retrieval(top_k=20, grouping={"enabled": True}))
    for hits in out.rankings.values():
        docs = [legs.chunks[h.chunk_index].doc_id for h in hits]
        assert len(docs) == len(set(docs))
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert "grouping" in out.latency_ms


def test_similar_preset_excludes_the_snippets_own_file(demo):
    legs, _ = demo
    docs = {d.doc_id: d for d in legs.dataset.documents}
    code_chunks = [c for c in legs.chunks if docs[c.doc_id].doc_type == "code"][:8]
    queries = [Query(f"s{i}", c.text[:300], {"doc_id": c.doc_id}) for i, c in enumerate(code_chunks)]
    out = search(queries, legs.context, retrieval(preset="similar"), documents=legs.dataset.documents)
    unexcluded = search(queries, legs.context, retrieval(preset="similar", filters={"exclude_query_document": False}),
                        documents=legs.dataset.documents)
    for q in queries:
        hits = out.rankings[q.query_id]
        assert 0 < len(hits) <= 5
        assert all(legs.chunks[h.chunk_index].doc_id != q.metadata["doc_id"] for h in hits)
        assert all(docs[legs.chunks[h.chunk_index].doc_id].doc_type == "code" for h in hits)
        # a snippet's nearest chunk is its own: without the exclusion it ranks first
        assert legs.chunks[unexcluded.rankings[q.query_id][0].chunk_index].doc_id == q.metadata["doc_id"]


@pytest.mark.parametrize("name", MODE_CONFIGS)
def test_mode_configs_validate_on_demo_and_scifact(name):
    path = REPO_ROOT / "configs" / "retrieval" / f"{name}.yaml"
    demo = load_experiment(path)
    assert demo.dataset.name == "demo"
    scifact = load_experiment(path, ["dataset.name=scifact", "chunking.strategy=none"])
    assert scifact.chunking.strategy == "none" and scifact.retrieval == demo.retrieval
    smart = load_experiment(path, ["chunking={strategy: fixed, chunk_size: 400, chunk_overlap: 50}"])
    assert smart.chunking.params.chunk_size == 400


def test_a_mode_config_runs_end_to_end_on_demo(workspace):
    from kbench.runner import run_experiment

    experiment = load_experiment(REPO_ROOT / "configs" / "retrieval" / "archon_weighted.yaml", [
        f"workspace={workspace}", "dataset.max_queries=20",
        "chunking={strategy: fixed, chunk_size: 600, chunk_overlap: 100}",  # the session's cached chunks
    ])
    result = run_experiment(experiment, progress=False, log=False)
    assert result.metrics["doc_ndcg_at_10"] > 0.3
    for stage in ("embed_query", "leg_vector", "leg_postgres_fts", "fusion", "total"):
        assert result.metrics[f"latency_ms_{stage}_p95"] >= result.metrics[f"latency_ms_{stage}_p50"] > 0
    assert Path(result.run_dir, "per_query.parquet").is_file()
