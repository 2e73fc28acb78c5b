"""kbench models train-reranker: positives, hard-negative mining, and a small real training run on the demo set."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from kbench.chunking import chunk_corpus
from kbench.cli import main
from kbench.config import ChunkingConfig, ConfigError, DatasetConfig, EmbeddingConfig, OverlapRule
from kbench.datasets import load_dataset
from kbench.embedding.stage import CachedEmbedder
from kbench.evaluation.relevance import chunk_matches_span
from kbench.retrieval.rerank.cross_encoder import resolve_cross_encoder
from kbench.training.reranker import (
    RerankerTrainingConfig, TrainingPair, listwise_groups, load_base_cross_encoder, mine_pairs, positive_chunks,
    train_reranker,
)
from tests.training.demo_reranker import CHUNKING


@pytest.fixture(scope="module")
def demo_mined(shared_cache_workspace):
    dataset = load_dataset(DatasetConfig(name="demo", max_queries=16, seed=0))
    chunks = chunk_corpus(dataset.documents, ChunkingConfig(**CHUNKING))
    embedder = CachedEmbedder(EmbeddingConfig(), shared_cache_workspace / "cache")
    vectors = embedder.embed([c.text for c in chunks]).vectors
    queries = embedder.embed_queries([q.text for q in dataset.queries])
    return dataset, chunks, vectors, queries


def test_span_positives_are_the_chunks_overlapping_a_reference(demo_mined):
    dataset, chunks, _, _ = demo_mined
    positives = positive_chunks(dataset, chunks)
    for q in dataset.queries:
        spans = dataset.spans[q.query_id]
        expected = {i for i, c in enumerate(chunks) if any(chunk_matches_span(c, s, OverlapRule()) for s in spans)}
        assert positives[q.query_id] == expected and expected


def test_beir_positives_are_the_judged_documents():
    dataset = load_dataset(DatasetConfig(name="scifact", split="train", max_queries=5, max_documents=60))
    chunks = chunk_corpus(dataset.documents, ChunkingConfig(strategy="none"))
    positives = positive_chunks(dataset, chunks)
    for q in dataset.queries:
        judged = {d for d, grade in dataset.qrels[q.query_id].items() if grade > 0}
        assert {chunks[i].doc_id for i in positives[q.query_id]} == judged


def test_hard_negatives_come_from_the_first_stage_top_k_and_are_never_positives(demo_mined):
    dataset, chunks, vectors, queries = demo_mined
    pairs, stats = mine_pairs(dataset, chunks, vectors, queries, negatives=2, mine_depth=10, seed=0)
    positives = positive_chunks(dataset, chunks)
    text_to_rows: dict[str, set[int]] = {}
    for i, c in enumerate(chunks):
        text_to_rows.setdefault(c.text, set()).add(i)
    by_query = {q.text: qi for qi, q in enumerate(dataset.queries)}
    for pair in pairs:
        qi = by_query[pair.query]
        rows = text_to_rows[pair.text]
        pos = positives[dataset.queries[qi].query_id]
        if pair.label == 1.0:
            assert rows & pos
        else:
            top10 = set(np.argsort(-(queries[qi] @ vectors.T))[:10].tolist())
            assert rows & top10 and not rows & pos
    assert stats["negatives"] == 2 * stats["queries"] == sum(p.label == 0.0 for p in pairs)
    assert stats["positives"] == sum(p.label == 1.0 for p in pairs)
    again, _ = mine_pairs(dataset, chunks, vectors, queries, negatives=2, mine_depth=10, seed=0)
    assert again == pairs  # seeded


def pairwise_accuracy(model, dataset, chunks, vectors, queries, config) -> float:
    """Share of (positive, negative) pairs of the same query where the positive scores higher."""
    pairs, _ = mine_pairs(dataset, chunks, vectors, queries, config.negatives, config.mine_depth, config.seed)
    scores = model.predict([[p.query, p.text] for p in pairs], batch_size=16, show_progress_bar=False)
    wins = total = 0
    for q in {p.query_id for p in pairs}:
        pos = [s for p, s in zip(pairs, scores) if p.query_id == q and p.label == 1.0]
        neg = [s for p, s in zip(pairs, scores) if p.query_id == q and p.label == 0.0]
        wins += sum(a > b for a in pos for b in neg)
        total += len(pos) * len(neg)
    return wins / total


@pytest.mark.slow
def test_trained_reranker_is_saved_by_name_and_beats_its_random_head(demo_reranker, demo_mined, monkeypatch):
    """Stays slow: its setup trains a real cross-encoder (MiniLM, 3 epochs on 16 questions at 128 tokens), once per
    test run for every worker (tests/training/demo_reranker.py, built_once; the rerank tests reuse it), and the
    training is what is checked: the loss falls and the trained head beats the random one."""
    from sentence_transformers import CrossEncoder

    card = json.loads((demo_reranker.path / "kbench_model.json").read_text())
    assert card["kind"] == "cross_encoder" and card["base"] == "all-MiniLM-L6-v2" and card["dataset"] == "demo"
    assert card["split_applies"] is False  # the demo set has no splits: every sampled question is used
    assert card["counts"]["queries"] == 16 and card["counts"]["negatives"] == 32
    assert card["counts"]["pairs"] == card["counts"]["positives"] + card["counts"]["negatives"]
    assert card["training"]["seed"] == 0 and card["loss_last_window"] < card["loss_first_window"]

    monkeypatch.setenv("KBENCH_MODELS_DIR", str(demo_reranker.models_dir))
    assert resolve_cross_encoder(demo_reranker.name) == demo_reranker.path
    trained = CrossEncoder(str(demo_reranker.path), device="cpu", local_files_only=True)
    untrained = load_base_cross_encoder("all-MiniLM-L6-v2", 128, seed=0)

    dataset, chunks, vectors, queries = demo_mined
    config = demo_reranker.config
    trained_acc = pairwise_accuracy(trained, dataset, chunks, vectors, queries, config)
    untrained_acc = pairwise_accuracy(untrained, dataset, chunks, vectors, queries, config)
    assert trained_acc > untrained_acc
    assert trained_acc > 0.75, (trained_acc, untrained_acc)


def test_cli_refuses_to_replace_a_model_without_force(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KBENCH_MODELS_DIR", str(tmp_path))
    (tmp_path / "taken").mkdir()
    with pytest.raises(SystemExit) as e:
        main(["models", "train-reranker", "--dataset", "demo", "--out", "taken"])
    assert e.value.code == 2
    assert "--force" in capsys.readouterr().err


def test_listwise_groups_put_each_positive_first_with_its_own_querys_negatives():
    pairs = [TrainingPair("q1", "a", 1.0, "1"), TrainingPair("q1", "b", 1.0, "1"), TrainingPair("q1", "x", 0.0, "1"),
             TrainingPair("q1", "y", 0.0, "1"), TrainingPair("q2", "c", 1.0, "2"), TrainingPair("q2", "z", 0.0, "2"),
             TrainingPair("q3", "d", 1.0, "3")]  # q3 has no negative: nothing to rank it against
    groups = listwise_groups(pairs)
    assert [[p.text for p in g] for g in groups] == [["a", "x", "y"], ["b", "x", "y"], ["c", "z"]]


def test_an_unknown_loss_is_refused_before_any_work(tmp_path, monkeypatch):
    monkeypatch.setenv("KBENCH_MODELS_DIR", str(tmp_path))
    with pytest.raises(ConfigError, match="--loss: 'hinge' is not one of listwise, pointwise"):
        train_reranker(RerankerTrainingConfig(dataset="no-such-dataset", out="m", loss="hinge"))


def test_listwise_groups_keep_two_queries_with_the_same_text_apart():
    pairs = [TrainingPair("same claim", "a", 1.0, "1"), TrainingPair("same claim", "x", 0.0, "1"),
             TrainingPair("same claim", "b", 1.0, "2"), TrainingPair("same claim", "y", 0.0, "2")]
    assert [[p.text for p in g] for g in listwise_groups(pairs)] == [["a", "x"], ["b", "y"]]


def test_cli_names_the_losses_when_given_an_unknown_one(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KBENCH_MODELS_DIR", str(tmp_path))
    with pytest.raises(SystemExit) as e:
        main(["models", "train-reranker", "--dataset", "demo", "--out", "m", "--loss", "hinge"])
    assert e.value.code == 2
    assert "'hinge' is not one of listwise, pointwise" in capsys.readouterr().err


def test_training_says_its_steps_up_front_and_an_estimate_after_the_first():
    """Issue 53 item 8: a cross-encoder ran at ~22 s a step for ~90 minutes with no estimate; the step count comes
    before the first step, the estimate right after it (timed), and a step line at least every LINE_EVERY_S."""
    from kbench.training.reranker import TrainingPair, fit_cross_encoder

    pairs = [TrainingPair(f"question {q}", f"passage {q} {n}", 1.0 if n == 0 else 0.0, f"q{q}")
             for q in range(4) for n in range(3)]
    lines: list[str] = []
    model = load_base_cross_encoder("all-MiniLM-L6-v2", 32, seed=0)
    fit_cross_encoder(model, pairs, loss="listwise", epochs=1, batch_size=6, learning_rate=1e-4,
                      head_learning_rate=1e-3, warmup_fraction=0.1, seed=0, log=lines.append)
    assert lines[0] == ("train: 1 epoch of 2 steps (4 groups, about 6 pairs a step): 2 steps; the first step is timed "
                        "for an estimate")
    assert re.fullmatch(r"train: 2 steps, about \S+ at (\S+ steps/s|\S+ a step) \(timed on the first 1\); a line at "
                        r"least every 30\.0s", lines[1]), lines[1]
    assert lines[-1].startswith("step 2/2  listwise loss ")
