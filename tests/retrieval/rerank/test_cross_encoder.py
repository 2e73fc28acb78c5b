"""cross_encoder: model resolution that never downloads, and a real rerank with a model trained on the demo set."""
from __future__ import annotations

import time

import pytest

from kbench.config import ConfigError, load_experiment
from kbench.embedding.models import ModelNotInstalledError
from kbench.retrieval.rerank.cross_encoder import resolve_cross_encoder
from kbench.runner import run_experiment


def test_hub_id_not_in_the_local_cache_fails_fast_naming_the_trainer(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hf-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    started = time.perf_counter()
    with pytest.raises(ModelNotInstalledError) as e:
        resolve_cross_encoder("cross-encoder/ms-marco-MiniLM-L-6-v2")
    assert time.perf_counter() - started < 10  # a lookup, never a network wait
    assert "kbench models train-reranker" in str(e.value) and "never downloads" in str(e.value)


def test_an_embedding_model_is_refused_because_its_head_would_be_random():
    with pytest.raises(ModelNotInstalledError, match="not a cross-encoder.*random"):
        resolve_cross_encoder("all-MiniLM-L6-v2")


def test_run_with_a_missing_reranker_stops_before_any_work(workspace, config_for, tmp_path, monkeypatch):
    monkeypatch.setenv("KBENCH_MODELS_DIR", str(tmp_path / "no-models"))
    config = config_for(rerank={"enabled": True, "strategy": "cross_encoder", "model": "never-trained"})
    with pytest.raises(ModelNotInstalledError, match="train-reranker"):
        run_experiment(load_experiment(config), progress=False)
    assert not (workspace / "runs").exists()


def test_unknown_knob_is_a_config_error(config_for):
    with pytest.raises(ConfigError, match="rerank"):
        load_experiment(config_for(rerank={"enabled": True, "strategy": "cross_encoder", "candidates": 3}))


@pytest.mark.slow
def test_trained_reranker_rescores_vector_candidates_by_name(demo_reranker, config_for, monkeypatch):
    from sentence_transformers import CrossEncoder

    monkeypatch.setenv("KBENCH_MODELS_DIR", str(demo_reranker.models_dir))
    dataset = {"name": "demo", "max_queries": 8}
    plain = run_experiment(load_experiment(config_for(dataset=dataset, retrieval={"legs": ["vector"], "top_k": 5})),
                           progress=False)
    reranked = run_experiment(load_experiment(config_for(
        dataset=dataset, retrieval={"legs": ["vector"], "top_k": 5},
        rerank={"enabled": True, "strategy": "cross_encoder", "model": demo_reranker.name, "candidate_multiplier": 3},
    )), progress=False)

    model = CrossEncoder(str(demo_reranker.path), device="cpu", local_files_only=True)
    moved = 0
    for query in reranked.dataset.queries:
        hits = reranked.run[query.query_id]
        assert len(hits) == 5
        first = [h.leg_ranks["first_stage"] for h in hits]
        assert max(first) <= 15 and len(set(first)) == 5  # from the 15 = 5 x 3 vector candidates
        text = {c.chunk_id: c.text for c in reranked.chunks}
        expected = model.predict([[query.text, text[h.chunk_id]] for h in hits],
                                 show_progress_bar=False)
        assert [h.score for h in hits] == pytest.approx(expected.tolist(), abs=1e-5)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        vector_top = [h.chunk_id for h in plain.run[query.query_id]]
        assert [h.leg_scores["first_stage"] for h in hits] == pytest.approx(
            [h.leg_scores["vector"] for h in hits])
        moved += [h.chunk_id for h in hits] != vector_top
    assert moved > 0  # the reranker changed at least one query's top 5
    assert reranked.metrics["latency_ms_rerank_p50"] > 0
    assert "latency_ms_rerank_p50" not in plain.metrics
