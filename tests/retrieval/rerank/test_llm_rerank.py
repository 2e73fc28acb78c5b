"""llm: the GWI spec's prompt on real chunks, answer parsing, the unconfigured path, and one real HTTP round trip."""
from __future__ import annotations

import pytest

from kbench.chunking import chunk_corpus
from kbench.config import ChunkingConfig, ConfigError, DatasetConfig, load_experiment
from kbench.datasets import load_dataset
from kbench.records import Hit
from kbench.retrieval.registry import RERANKERS, SearchContext
from kbench.retrieval.rerank.llm import parse_ranking, ranking_scores, rerank_prompt
from kbench.runner import run_experiment

KEY_ENV = "KBENCH_TEST_LLM_KEY"


@pytest.fixture(scope="module")
def demo_chunks():
    dataset = load_dataset(DatasetConfig(name="demo"))
    return dataset, chunk_corpus(dataset.documents, ChunkingConfig(strategy="fixed", chunk_size=600, chunk_overlap=100))


def test_prompt_lists_zero_based_snippets_cut_at_200_chars(demo_chunks):
    dataset, chunks = demo_chunks
    texts = [chunks[0].text, chunks[5].text, "short"]
    prompt = rerank_prompt(dataset.queries[0].text, texts)
    lines = prompt.split("\n")
    assert lines[0] == f"Query: {dataset.queries[0].text}"
    assert lines[1] == "" and lines[2] == "Rank these results by relevance (1 = most relevant):"
    assert prompt.endswith("\n\nReturn: JSON array of indices in order of relevance")
    listed = prompt.split("relevant):\n", 1)[1].split("\n\nReturn:", 1)[0]
    assert listed == "\n".join(f"[{i}] {t[:200]}..." for i, t in enumerate(texts))
    assert len(chunks[0].text) > 200 and chunks[0].text[:200] + "..." in prompt and chunks[0].text[:201] not in prompt


@pytest.mark.parametrize("answer, expected", [
    ("[2, 0, 1, 3]", [2, 0, 1, 3]),
    ("```json\n[3, 1]\n```", [3, 1, 0, 2]),  # unmentioned candidates follow in first-stage order
    ('Sure! The ranking is ["2", "2", "0"].', [2, 0, 1, 3]),  # strings and repeats
    ("[0] mentions retries, [1] does not. Order: [1, 0, 9, 3]", [1, 0, 3, 2]),  # echoed labels, out of range
    ("[\n  2,\n  3,\n]", [2, 3, 0, 1]),  # trailing comma
])
def test_parse_ranking(answer, expected):
    assert parse_ranking(answer, 4) == expected


def test_answer_without_a_list_is_none_and_scores_follow_positions():
    assert parse_ranking("Result 2 is the most relevant.", 4) is None
    assert parse_ranking("", 4) is None
    assert ranking_scores([2, 0, 1]) == [2.0, 1.0, 3.0]


def test_unconfigured_llm_reranker_fails_at_start_naming_what_to_set(workspace, config_for, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv(KEY_ENV, raising=False)
    config = config_for(rerank={"enabled": True, "strategy": "llm", "api_key_env": KEY_ENV})
    with pytest.raises(ConfigError) as e:
        run_experiment(load_experiment(config), progress=False)
    assert {"rerank.base_url", "rerank.model", KEY_ENV} <= set(str(e.value).replace(":", " ").split())
    assert not (workspace / "runs").exists()


def test_round_trip_applies_the_models_order_and_caches_it(demo_chunks, chat_server, workspace, monkeypatch):
    dataset, chunks = demo_chunks
    monkeypatch.setenv(KEY_ENV, "sk-test")
    query = dataset.queries[1]  # which port lumend exposes metrics on
    on_topic = next(i for i, c in enumerate(chunks) if "9464" in c.text)
    hits = [Hit(i, 1.0 - 0.1 * r, leg_scores={"vector": 1.0 - 0.1 * r}, leg_ranks={"vector": r + 1})
            for r, i in enumerate([0, 1, on_topic])]
    entry = RERANKERS.get("llm")
    params = entry.params(base_url=chat_server.base_url, model="overlap-ranker", api_key_env=KEY_ENV,
                          snippet_chars=2000)
    reranker = entry.impl(SearchContext(chunks=chunks, workspace=workspace), params)
    out = reranker.rerank(query.text, hits, top_k=3)
    sent = chat_server.requests[0]
    assert sent["prompt"] == rerank_prompt(query.text, [chunks[h.chunk_index].text for h in hits], 2000)
    assert sent["model"] == "overlap-ranker" and sent["authorization"] == "Bearer sk-test"
    assert out[0].chunk_index == on_topic and out[0].leg_ranks["first_stage"] == 3 and out[0].score == 3.0
    assert reranker.parse_failures == 0

    fresh = entry.impl(SearchContext(chunks=chunks, workspace=workspace), params)
    again = fresh.rerank(query.text, hits, top_k=3)
    assert len(chat_server.requests) == 1  # answered from the workspace cache
    assert [h.chunk_index for h in again] == [h.chunk_index for h in out]


def test_an_answer_naming_no_candidate_is_unusable():
    assert parse_ranking("## [10]\n\n## [11]\n\n## [12]", 10) is None  # SmolLM2-135M's headings, not a ranking
    assert parse_ranking("## [1]\n\n## [2]\n\n## [3]", 10) is None  # labels echoed one per line
    assert parse_ranking("[3]", 10) == [3, 0, 1, 2, 4, 5, 6, 7, 8, 9]  # one lone list is an answer
    assert parse_ranking("[10, 3]", 10) == [3, 0, 1, 2, 4, 5, 6, 7, 8, 9]


def test_unusable_answers_are_counted_in_the_run_metrics_and_said_on_the_console(config_for, chat_server,
                                                                                 monkeypatch, capsys):
    """A weak model that never writes an index list: the run stops at the first answer (below the floor of
    usable answers, 80%: 4 queries allow none); with allow_partial it keeps first-stage order, and says so in
    llm_rerank_unusable_answers (MLflow), the tag kbench.llm.partial and a console warning, instead of a rerank
    row that looks real."""
    from mlflow.tracking import MlflowClient

    from kbench.cli.tables import llm_usage_lines, print_metrics
    from kbench.llm.usable import UnusableAnswersError
    from kbench.pipeline import run_pipeline

    monkeypatch.setenv(KEY_ENV, "sk-test")
    chat_server.reply = lambda prompt: "The server returns a JSON array of indices in order of relevance."
    base = {"dataset": {"name": "demo", "max_queries": 4}, "retrieval": {"legs": ["bm25"], "top_k": 5}}
    plain = run_pipeline(load_experiment(config_for(**base)), progress=False)
    rerank = {"enabled": True, "strategy": "llm", "base_url": chat_server.base_url, "model": "weak",
              "api_key_env": KEY_ENV, "candidate_multiplier": 1}
    with pytest.raises(UnusableAnswersError, match=r"^rerank: 0 of the first 1 \(of 4\) answers usable \(1 unusable, "
                       r"0 failed\) from model weak, below the floor of 80%.*JSON list of indices"):
        run_experiment(load_experiment(config_for(**base, rerank=rerank)), progress=False)
    assert len(chat_server.requests) == 1
    reranked = run_experiment(load_experiment(config_for(**base, rerank=rerank,
                                                         llm={"policy": {"allow_partial": True}})), progress=False)
    assert len(chat_server.requests) == 1 + 3  # the first answer came from the cache
    assert MlflowClient(reranked.tracking_uri).get_run(reranked.run_id).data.tags["kbench.llm.partial"] == "rerank"
    assert reranked.metrics["llm_rerank_unusable_answers"] == 4 == reranked.metrics["llm_total_unusable_answers"]
    assert reranked.metrics["llm_rerank_failures"] == 0
    assert reranked.metrics["doc_ndcg_at_5"] == plain.metrics["doc_ndcg_at_5"]  # the first-stage order, kept
    print_metrics(reranked)
    out = capsys.readouterr().out
    assert "LLM rerank: 3 requests, 1 cached" in out and "WARNING: 4 unusable answers" in out
    assert "PARTIAL: went on below llm.policy.min_usable" in out
    usable = {k: (0.0 if k.endswith("unusable_answers") else v) for k, v in reranked.metrics.items()}
    usable.pop("llm_rerank_partial")
    (line,) = llm_usage_lines(usable)
    assert line.startswith("LLM rerank: 3 requests") and "WARNING" not in line
