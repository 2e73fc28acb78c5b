"""weighted fusion's ``missing_score`` (was ``missing``): min, zero and union, the old spelling, and parity of ``union``
with AutoRAG's convex combination (``hybrid_cc`` after AutoRAG's hybrid retrieval fetched each retriever's scores of
the other's ids), on kbench's real vector and bm25 legs over the demo set through the whole search stage.

AutoRAG is not installed here; ``autorag_fuse_per_query`` below is AutoRAG's ``fuse_per_query`` and normalizations
(autorag/nodes/retrieval/hybrid_cc.py: ``normalize_mm``, ``normalize_z``, ``normalize_dbsf``, then a pandas concat,
``fillna(0)``, ``weight`` on the semantic leg), and ``union_inputs`` what its ``get_ids_and_scores``
(autorag/nodes/retrieval/run.py) gives it: each leg's ids followed by the other leg's ids it lacks, scored by
``get_scores_by_ids``, i.e. by the leg itself."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from kbench.config import ConfigError, load_experiment
from kbench.paths import REPO_ROOT
from kbench.pipeline import prepare_corpus, search_corpus
from kbench.retrieval.fusion.weighted import WeightedParams, weighted_fuse
from kbench.retrieval.stage import build_legs, leg_contexts
from tests.conftest import make_config

VEC = [(1, 0.9), (2, 0.5), (3, 0.1)]
BM25 = [(3, 12.0), (4, 8.0), (5, 2.0)]


def scores(hits):
    return {h.chunk_index: h.score for h in hits}


def test_the_old_spelling_is_read_and_hashed_alike(workspace):
    assert WeightedParams(missing="zero").missing_score == "zero"
    with pytest.raises(ValueError, match="are one setting"):
        WeightedParams(missing="zero", missing_score="min")
    def weighted(**fusion):
        return load_experiment(make_config(workspace, retrieval={"legs": ["vector", "bm25"], "fusion": {
            "strategy": "weighted", **fusion}}))

    old, new = weighted(missing="zero"), weighted(missing_score="zero")
    assert old.retrieval.fusion.params.missing_score == "zero" and old.run_key() == new.run_key()
    assert new.run_key_payload()["retrieval"]["fusion"]["missing"] == "zero"  # hashed under the old name
    assert weighted().run_key() != new.run_key()
    with pytest.raises(ConfigError, match="retrieval.fusion.missing .* are one setting"):
        load_experiment(REPO_ROOT / "configs/retrieval/weighted.yaml", [f"workspace={workspace}",
                                                                         "retrieval.fusion.missing=zero"])


def test_zero_min_and_union_on_hand_built_lists():
    legs = {"vector": VEC, "bm25": BM25}
    z_min = scores(weighted_fuse(legs, WeightedParams(normalization="z-score", missing_score="min"), 10))
    z_zero = scores(weighted_fuse(legs, WeightedParams(normalization="z-score", missing_score="zero"), 10))
    assert z_min[1] < z_zero[1] and z_min[3] == pytest.approx(z_zero[3])
    unreturned = {"vector": {4: 0.3, 5: -0.2}, "bm25": {1: 0.0, 2: 1.0}}  # each leg's own score of the others
    union = weighted_fuse(legs, WeightedParams(weight=0.5, missing_score="union"), 10, unreturned=unreturned)
    # min-max over the union: vector [0.9, 0.5, 0.3, 0.1, -0.2] / 1.1; bm25 [12, 8, 2, 1, 0] / 12
    by_hand = {1: (1.1 / 1.1 + 0 / 12) / 2, 2: (0.7 / 1.1 + 1 / 12) / 2, 3: (0.3 / 1.1 + 1) / 2,
               4: (0.5 / 1.1 + 8 / 12) / 2, 5: (0 + 2 / 12) / 2}
    assert scores(union) == pytest.approx(by_hand)
    hit = {h.chunk_index: h for h in union}
    assert hit[1].leg_ranks == {"vector": 1} and hit[1].match_type == "vector"  # evidence: the leg's own list
    with pytest.raises(ValueError, match="gave no score for 2 candidates"):
        weighted_fuse(legs, WeightedParams(missing_score="union"), 10, unreturned={"vector": {}, "bm25": {1: 0.0}})


def test_union_needs_legs_that_score_any_unit(workspace):
    config = make_config(workspace, retrieval={"legs": ["vector", "bm25"], "fusion": {
        "strategy": "weighted", "missing_score": "union"}, "leg_params": {"bm25": {"unit": "document"}}})
    with pytest.raises(ConfigError, match="missing_score: union has each leg score .* the legs search different"):
        load_experiment(config)


def autorag_normalize(method: str, scores: list[float]) -> np.ndarray:
    arr = np.array(scores)
    if method == "mm":
        return (arr - np.min(arr)) / (np.max(arr) - np.min(arr))
    if method == "z":
        return (arr - np.mean(arr)) / np.std(arr)
    low, high = np.mean(arr) - 3 * np.std(arr), np.mean(arr) + 3 * np.std(arr)  # dbsf
    return (arr - low) / (high - low)


def autorag_fuse_per_query(semantic_ids, lexical_ids, semantic_scores, lexical_scores, method, weight, top_k):
    ids = [semantic_ids, lexical_ids]
    scores = [autorag_normalize(method, semantic_scores), autorag_normalize(method, lexical_scores)]
    df = pd.concat([pd.Series(dict(zip(_id, score))) for _id, score in zip(ids, scores)], axis=1)
    df.columns = ["semantic", "lexical"]
    df = df.fillna(0)
    df["weighted_sum"] = df.mul((weight, 1.0 - weight)).sum(axis=1)
    df = df.sort_values(by="weighted_sum", ascending=False)
    return df.index.tolist()[:top_k], df["weighted_sum"][:top_k].tolist()


def union_inputs(query, vector, legs, found):
    """AutoRAG's get_ids_and_scores: each leg's ids, then the other leg's ids it lacks, scored by the leg."""
    out = []
    for name, other in (("vector", "bm25"), ("bm25", "vector")):
        own = [row for row, _ in found[name]]
        extra = [row for row, _ in found[other] if row not in set(own)]
        extra_scores = legs[name].score([query], vector, [np.array(extra, dtype=np.int64)])[0] if extra else []
        out.append((own + extra, [s for _, s in found[name]] + [float(s) for s in extra_scores]))
    return out


@pytest.mark.parametrize("normalization, autorag", [("min-max", "mm"), ("z-score", "z"), ("dbsf", "dbsf")])
def test_union_matches_autorag_hybrid_cc(workspace, normalization, autorag):
    weight, depth = 0.6, 20
    experiment = load_experiment(make_config(workspace, retrieval={
        "legs": ["vector", "bm25"], "top_k": depth, "candidates_per_leg": depth, "latency": "batch",
        "fusion": {"strategy": "weighted", "weight": weight, "normalization": normalization,
                   "missing_score": "union"}}))
    corpus = prepare_corpus(experiment, progress=False)
    result = search_corpus(corpus, experiment)
    legs = build_legs(leg_contexts(corpus.context, experiment.retrieval), experiment.retrieval)
    queries = corpus.dataset.queries
    vectors = corpus.context.embed_queries([q.text for q in queries])
    compared = 0
    for qi, query in enumerate(queries):
        found = {name: leg.search([query], vectors[qi:qi + 1], depth)[0] for name, leg in legs.items()}
        for name, ranked in found.items():  # a leg's score of a unit is what its search gives that unit
            rows = np.array([row for row, _ in ranked], dtype=np.int64)
            again = legs[name].score([query], vectors[qi:qi + 1], [rows])[0] if len(rows) else []
            assert list(again) == pytest.approx([s for _, s in ranked], rel=1e-5, abs=1e-6)
        (sem_ids, sem_scores), (lex_ids, lex_scores) = union_inputs(query, vectors[qi:qi + 1], legs, found)
        if len(found["bm25"]) < 2 or len(set(sem_scores)) < 2 or len(set(lex_scores)) < 2:
            continue  # AutoRAG's min-max divides by zero on a flat list
        ids, fused = autorag_fuse_per_query(sem_ids, lex_ids, sem_scores, lex_scores, autorag, weight, 2 * depth)
        theirs = {corpus.context.chunks[i].chunk_id: s for i, s in zip(ids, fused)}
        ours = {h.chunk_id: h.score for h in result.run[query.query_id]}  # the best top_k of the union
        assert list(ours) == [c for c, _ in sorted(theirs.items(), key=lambda cs: -cs[1])][:depth], query.query_id
        assert [ours[c] for c in ours] == pytest.approx([theirs[c] for c in ours], abs=1e-9)
        compared += 1
    assert compared >= 40


def test_postgres_fts_scores_units_it_did_not_match():
    from kbench.records import Chunk, Query
    from kbench.retrieval.legs.postgres_fts import PostgresFtsLeg, PostgresFtsParams
    from kbench.retrieval.registry import SearchContext

    chunks = [Chunk(f"d{i}", 0, 0, len(t), t) for i, t in enumerate(
        ["retries back off exponentially", "retries are counted", "nothing here"])]
    leg = PostgresFtsLeg(SearchContext(chunks=chunks), PostgresFtsParams())
    query = Query("q", "exponential retries")
    assert [i for i, _ in leg.search([query], None, 10)[0]] == [0]  # plainto: both words
    found = dict(leg.search([query], None, 10)[0])
    scored = leg.score([query], None, [np.array([0, 1, 2])])[0]
    assert list(scored) == [found[0], 0.0, 0.0]  # ts_rank_cd without the WHERE: no cover, 0
    ts_rank = PostgresFtsLeg(SearchContext(chunks=chunks), PostgresFtsParams(rank_function="ts_rank"))
    assert list(ts_rank.score([query], None, [np.array([1, 2])])[0]) == [np.float32(1e-20)] * 2  # no pair: 1e-20
