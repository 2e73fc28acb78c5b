"""What a run folder keeps for its MLflow export: rankings with each hit's evidence read back whole, the traced
sample, the question set's record and the LLM stages' prompts, on real runs of the demo set."""
from __future__ import annotations

import pandas as pd

from kbench.config import load_experiment
from kbench.pipeline import run_pipeline
from kbench.retrieval.query.prompts import EXPAND_PROMPT
from kbench.tracking.config import TraceSettings
from kbench.tracking.run_records import (FINAL, candidates_frame, dataset_record, ranked_hits, rankings_frame,
                                        stage_prompts, traced_query_ids)
from tests.conftest import make_config


def test_rankings_keep_each_hits_offsets_and_leg_evidence(workspace):
    experiment = load_experiment(make_config(
        workspace, dataset={"name": "demo", "max_queries": 5},
        retrieval={"legs": ["bm25", "vector"], "fusion": {"strategy": "rrf"}, "top_k": 8}))
    done = run_pipeline(experiment, progress=False)
    back = ranked_hits(pd.read_parquet(_parquet(rankings_frame(done.run), workspace / "r.parquet")))
    for qid, hits in done.run.hits.items():
        assert [(h.chunk_id, h.doc_id, h.score, h.start, h.end, h.leg_ranks, h.leg_scores, h.match_type)
                for h in back[qid]] == [(h.chunk_id, h.doc_id, h.score, h.start, h.end, h.leg_ranks, h.leg_scores,
                                         h.match_type) for h in hits]
    frame = candidates_frame(done.run, done.chunks, list(done.run.hits)[:2], max_documents=3)
    for (qid, stage), rows in frame.groupby(["query_id", "stage"]):
        ids = [h.chunk_id for h in done.run.hits[qid]] if stage == FINAL else done.run.stages[qid][stage]
        assert list(rows["chunk_id"]) == ids[:3]
    texts = {c.chunk_id: c.text for c in done.chunks}
    assert all(texts[c].startswith(t) for c, t in zip(frame["chunk_id"], frame["text"]))
    record = dataset_record(done.dataset, experiment.dataset, "abc")
    assert record["name"] == "demo[max_queries=5, seed=0]" and len(record["questions"]) == 5
    assert record["questions"][0]["expected"][0]["content"]


def test_the_traced_sample_is_seeded_and_in_the_runs_order():
    ids = [f"q{i:03d}" for i in range(50)]
    assert traced_query_ids(ids, TraceSettings(max_queries=100)) == ids
    sample = traced_query_ids(ids, TraceSettings(max_queries=7, seed=1))
    assert len(sample) == 7 and sample == sorted(sample) and sample == traced_query_ids(ids, TraceSettings(
        max_queries=7, seed=1)) != traced_query_ids(ids, TraceSettings(max_queries=7, seed=2))
    assert traced_query_ids(ids, TraceSettings(enabled=False)) == traced_query_ids(ids, TraceSettings(max_queries=0)) == []


def test_the_prompts_of_the_llm_stages_a_config_turns_on(workspace):
    plain = load_experiment(make_config(workspace))
    assert stage_prompts(plain) == {}
    expanded = load_experiment(make_config(workspace, query={"expansion": {
        "enabled": True, "strategy": "llm", "base_url": "http://127.0.0.1:9/v1", "model": "m"}}))
    (name, prompt), = stage_prompts(expanded).items()
    assert name == "kbench-query-expansion" and prompt["template"] == EXPAND_PROMPT and prompt["model"] == "m"


def _parquet(frame, path):
    frame.to_parquet(path, index=False)
    return path
