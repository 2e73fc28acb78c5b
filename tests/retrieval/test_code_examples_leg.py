"""The ``code_examples`` leg over the code-example index on the demo set (summaries from the deterministic test
server): alone (hits are code blocks, span metrics on their offsets), fused with the page leg (document-level
fusion, each leg's best unit kept), and a re-run that asks the LLM nothing."""
from __future__ import annotations

import pytest

from kbench.config import load_experiment
from kbench.pipeline import run_pipeline
from tests.conftest import link_shared_cache, make_config
from tests.enrichment.chat_server import start_chat_server

KEY_ENV = "KBENCH_TEST_LLM_KEY"


@pytest.fixture(scope="module")
def index_config(tmp_path_factory, shared_cache_workspace):
    server = start_chat_server()
    workspace = link_shared_cache(tmp_path_factory.mktemp("code-examples"), shared_cache_workspace)

    def config(legs: list[str]):
        return load_experiment(make_config(
            workspace, enrichment={"code_examples": {"enabled": True, "base_url": server.base_url,
                                                     "model": "summarizer", "api_key_env": KEY_ENV}},
            retrieval={"legs": legs, "top_k": 10, "fusion": {"strategy": "rrf" if len(legs) > 1 else "none"}}))

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(KEY_ENV, "local")
        yield config, server
    server.close()


@pytest.fixture(scope="module")
def alone(index_config):
    config, server = index_config
    return run_pipeline(config(["code_examples"]), progress=False)


def test_alone_its_hits_are_code_blocks_with_their_page_offsets(alone):
    texts = {d.doc_id: d.text for d in alone.dataset.documents}
    assert alone.counts["code_examples"] == 20 and len(alone.chunks) == 20  # ranked units: the index
    for hits in alone.run.hits.values():
        for hit in hits:
            assert "#code_example:" in hit.chunk_id and hit.leg_ranks.keys() == {"code_examples"}
            code = texts[hit.doc_id][hit.start:hit.end]
            assert code == next(u.text for u in alone.chunks if u.chunk_id == hit.chunk_id)
    assert alone.metrics["llm_code_examples_requests"] == 20 and alone.metrics["llm_code_examples_failures"] == 0


def test_span_metrics_read_the_blocks_offsets(alone):
    """q069's reference (151 characters) lies inside backup-and-restore's 1058-character bash block."""
    (top, *_) = alone.run.hits["q069"]
    assert (top.doc_id, top.start, top.end) == ("operations/backup-and-restore.md", 1337, 2395)
    row = alone.per_query.set_index("query_id").loc["q069"]
    assert row["span_recall_at_1"] == 1.0 and row["span_precision_at_1"] == pytest.approx(151 / 1058, abs=1e-12)


def test_fused_with_the_pages_at_document_level(index_config, alone):
    config, server = index_config
    requests = len(server.requests)
    fused = run_pipeline(config(["vector", "code_examples"]), progress=False)
    assert len(server.requests) == requests  # every summary came from the cache
    assert fused.counts["code_examples_summaries_cached"] == 20 and fused.metrics["llm_code_examples_requests"] == 0
    assert fused.counts["units_code_example_embeddings_cached"] == 20
    units = {u.chunk_id: u for u in fused.chunks}
    both = [h for hits in fused.run.hits.values() for h in hits if set(h.leg_ranks) == {"vector", "code_examples"}]
    assert both, "some document is found by both legs"
    for hit in both:  # represented by its finest best unit, each leg's best unit kept as a passage
        assert set(hit.passages) == {"vector", "code_examples"}
        sizes = {leg: p.end - p.start for leg, p in hit.passages.items()}
        assert hit.end - hit.start == min(sizes.values())
        code = hit.passages["code_examples"]
        assert "#code_example:" in code.unit_id and (code.start, code.end) == (units[code.unit_id].start,
                                                                                units[code.unit_id].end)
    assert fused.metrics["doc_ndcg_at_10"] > alone.metrics["doc_ndcg_at_10"]  # the pages answer most questions


def test_fused_at_unit_level_code_examples_and_page_chunks_compete(index_config):
    config, server = index_config
    experiment = config(["vector", "code_examples"])
    experiment.retrieval.fusion_level = "unit"
    fused = run_pipeline(experiment, progress=False)
    ids = [h.chunk_id for hits in fused.run.hits.values() for h in hits]
    assert any("#code_example:" in i for i in ids) and any("#code_example:" not in i for i in ids)
    for qid, hits in fused.run.hits.items():  # RRF (k = 60) of the two legs' lists, by hand
        stages = fused.run.stages[qid]
        hand: dict[str, float] = {}
        for leg in ("leg_vector", "leg_code_examples"):
            for rank, unit_id in enumerate(stages[leg], start=1):
                hand[unit_id] = hand.get(unit_id, 0.0) + 1 / (60 + rank)
        best = sorted(hand.items(), key=lambda kv: -kv[1])[:len(hits)]
        assert [h.score for h in hits] == pytest.approx([s for _, s in best], abs=1e-12)
        assert {h.chunk_id for h in hits} <= set(hand)
