"""Each leg on its own unit (kbench/retrieval/units.py): the config keys, lifting a leg to documents, fusion
on hand-built legs, a leg on ``document`` equal to that leg run with ``chunking: none``, the offsets of the
best units, and the unit caches, on the demo set."""
from __future__ import annotations

import pytest

from kbench.config import RetrievalConfig, load_experiment
from kbench.pipeline import prepare_corpus, run_pipeline, search_corpus
from kbench.records import Chunk, Hit
from kbench.retrieval.fusion.rrf import RRFParams, rrf_fuse
from kbench.retrieval.units import UnitCatalog, attach_passages, lift_to_documents
from tests.conftest import make_config


def test_unit_keys_leave_a_config_without_units_unchanged():
    plain = RetrievalConfig(legs=["vector", "bm25"], fusion={"strategy": "rrf"})
    explicit = RetrievalConfig(legs=["vector", "bm25"], fusion={"strategy": "rrf"},
                               leg_params={"vector": {"unit": "chunk", "aggregation": "max"}})
    assert plain.model_dump() == explicit.model_dump()  # same resolved config, same run key
    assert "unit" not in plain.leg_params["bm25"] and not plain.multi_unit
    multi = RetrievalConfig(legs=["vector", "bm25"], fusion={"strategy": "rrf"},
                            leg_params={"bm25": {"unit": "document", "k1": 0.9}})
    assert multi.leg_params["bm25"]["unit"] == "document" and multi.leg_knobs("bm25")["k1"] == 0.9
    assert "unit" not in multi.leg_knobs("bm25") and multi.multi_unit
    same = RetrievalConfig(legs=["vector", "bm25"], fusion={"strategy": "rrf"},
                           leg_params={"vector": {"unit": {"strategy": "none"}}, "bm25": {"unit": "document"}})
    assert not same.multi_unit  # {strategy: none} builds the document units


@pytest.mark.parametrize("unit, message", [
    ("pages", "'pages' is neither an index (chunk, code_example, document"),
    ({"strategy": "fixed", "chunk_size": -5}, "chunk_size"),
])
def test_a_bad_unit_is_refused_naming_the_leg(unit, message):
    with pytest.raises(ValueError) as e:
        RetrievalConfig(legs=["bm25"], leg_params={"bm25": {"unit": unit}})
    assert "retrieval.leg_params.bm25.unit" in str(e.value) and message in str(e.value)


def units(doc_id: str, n: int, size: int = 10) -> list[Chunk]:
    return [Chunk(doc_id, i, i * size, (i + 1) * size, f"{doc_id} {i}") for i in range(n)]


def test_lift_to_documents_by_max_sum_and_top_n_mean():
    rows = units("a", 3) + units("b", 2)  # rows 0-2: a, 3-4: b
    catalog = UnitCatalog.build({"leg": rows})
    ranked = [(3, 0.9), (0, 0.8), (1, 0.7), (2, 0.6), (4, 0.1)]
    by_max, best = lift_to_documents(ranked, catalog.doc_of, 0, "max")
    assert by_max == [(1, 0.9), (0, 0.8)] and best == {1: 3, 0: 0}  # doc index 0 = a, 1 = b
    by_sum, _ = lift_to_documents(ranked, catalog.doc_of, 0, "sum")
    assert by_sum == [(0, pytest.approx(2.1)), (1, pytest.approx(1.0))]
    by_mean, _ = lift_to_documents(ranked, catalog.doc_of, 0, "top-n-mean", n=2)
    assert by_mean == [(0, pytest.approx(0.75)), (1, pytest.approx(0.5))]
    tied, _ = lift_to_documents([(0, 0.5), (3, 0.5)], catalog.doc_of, 0, "max")
    assert [d for d, _ in tied] == [0, 1]  # ties keep the order of the documents' best units


def test_rrf_at_document_level_on_hand_built_legs():
    """vector over 10-char chunks, bm25 over whole documents; by hand: RRF(k=60) of the lifted rankings."""
    chunks = units("a", 3) + units("b", 2) + units("c", 1)
    documents = [Chunk(d, 0, 0, n * 10, d, unit="document") for d, n in (("a", 3), ("b", 2), ("c", 1))]
    catalog = UnitCatalog.build({"vector": chunks, "bm25": documents})
    assert catalog.offset == {"vector": 0, "bm25": 6} and catalog.doc_ids == ["a", "b", "c"]
    vector = [(4, 0.9), (1, 0.8), (0, 0.7), (5, 0.2)]  # b#1, a#1, a#0, c#0 -> documents b, a, c
    bm25 = [(0, 12.0), (2, 3.0)]  # a, c
    lifted, best = {}, {}
    for leg, ranked in (("vector", vector), ("bm25", bm25)):
        lifted[leg], best[leg] = lift_to_documents(ranked, catalog.doc_of, catalog.offset[leg])
    fused = rrf_fuse(lifted, RRFParams(), top_k=10)
    hand = {"a": 1 / 62 + 1 / 61, "b": 1 / 61, "c": 1 / 63 + 1 / 62}
    assert [catalog.doc_ids[h.chunk_index] for h in fused] == ["a", "c", "b"]
    assert [h.score for h in fused] == pytest.approx([hand["a"], hand["c"], hand["b"]])
    hits = attach_passages(fused, best, catalog, ["vector", "bm25"])
    a, c, b = hits
    assert a.passages == {"vector": 1, "bm25": 6} and a.chunk_index == 1  # a's finest best unit: chunk a#1
    assert c.passages == {"vector": 5, "bm25": 8} and c.chunk_index == 5  # equal lengths: first leg's
    assert b.passages == {"vector": 4} and b.chunk_index == 4
    assert a.leg_ranks == {"vector": 2, "bm25": 1} and a.leg_scores == {"vector": 0.8, "bm25": 12.0}
    only_bm25 = attach_passages([Hit(0, 1.0, leg_ranks={"bm25": 1})], {"vector": {}, "bm25": {0: 6}}, catalog,
                                ["vector", "bm25"])
    assert only_bm25[0].chunk_index == 6  # found by the document leg alone: the whole document


def keyword_config(workspace, **retrieval):
    """Keyword legs only (no model): the demo set, 600/100 chunks."""
    return load_experiment(make_config(workspace, retrieval={"top_k": 20, **retrieval}))


def test_a_leg_on_document_equals_that_leg_with_chunking_none(workspace):
    on_documents = run_pipeline(keyword_config(workspace, legs=["bm25"], leg_params={"bm25": {"unit": "document"}}),
                                progress=False)
    config = make_config(workspace, retrieval={"legs": ["bm25"], "top_k": 20})
    config["chunking"] = {"strategy": "none"}
    chunking_none = run_pipeline(load_experiment(config), progress=False)
    for qid in chunking_none.run.query_ids:
        got, want = on_documents.run[qid], chunking_none.run[qid]
        assert [(h.doc_id, h.score, h.start, h.end) for h in got] == [(h.doc_id, h.score, h.start, h.end) for h in want]
        assert all(h.chunk_id == f"{h.doc_id}#document:0" for h in got)
    assert on_documents.metrics["doc_ndcg_at_10"] == chunking_none.metrics["doc_ndcg_at_10"]

    # the same leg inside a multi-unit run: its evidence per document is that run's score and rank
    fused = run_pipeline(keyword_config(workspace, legs=["postgres_fts", "bm25"], fusion={"strategy": "rrf"},
                                        candidates_per_leg=200, leg_params={"bm25": {"unit": "document"}}),
                         progress=False)
    for qid in chunking_none.run.query_ids:
        alone = {h.doc_id: (rank, h.score) for rank, h in enumerate(chunking_none.run[qid], start=1)}
        for h in fused.run[qid]:
            if "bm25" in h.leg_ranks:
                assert (h.leg_ranks["bm25"], h.leg_scores["bm25"]) == alone[h.doc_id]


def test_best_units_carry_valid_offsets(workspace):
    experiment = keyword_config(workspace, legs=["postgres_fts", "bm25"], fusion={"strategy": "rrf"},
                                leg_params={"postgres_fts": {"query_parser": "or"},
                                            "bm25": {"unit": {"strategy": "markdown"}}})
    done = run_pipeline(experiment, progress=False)
    texts = {d.doc_id: d.text for d in done.dataset.documents}
    by_id = {c.chunk_id: c for c in done.chunks}  # the catalog: the run's chunks, then the bm25 leg's sections
    assert len(by_id) == len(done.chunks)  # unit ids never collide with chunk ids
    both = 0
    for qid in done.run.query_ids:
        hits = done.run[qid]
        assert len({h.doc_id for h in hits}) == len(hits)  # one entry per fused document
        for h in hits:
            assert h.passages and set(h.passages) <= {"postgres_fts", "bm25"}
            for leg, passage in h.passages.items():
                unit = by_id[passage.unit_id]
                assert unit.doc_id == h.doc_id and (passage.start, passage.end) == (unit.start, unit.end)
                assert 0 <= passage.start < passage.end <= len(texts[h.doc_id])
                assert (unit.unit == "bm25") == (leg == "bm25")
            finest = min(h.passages.values(), key=lambda p: p.end - p.start)
            assert (h.chunk_id, h.start, h.end) == (finest.unit_id, finest.start, finest.end)
            both += len(h.passages) == 2
    assert both > 0
    assert done.metrics["doc_ndcg_at_10"] > 0.3 and "span_recall_at_10" in done.metrics


def test_units_are_cached_like_chunks(workspace):
    """vector over whole documents (32 texts to embed), bm25 over 2000-character windows of its own."""
    experiment = keyword_config(workspace, legs=["vector", "bm25"], fusion={"strategy": "rrf"},
                                leg_params={"vector": {"unit": "document"},
                                            "bm25": {"unit": {"strategy": "fixed", "chunk_size": 2000,
                                                              "chunk_overlap": 0}}})
    first = prepare_corpus(experiment, progress=False)
    n_docs = len(first.dataset.documents)
    assert list(first.indexes) == ["chunk", "document", "bm25"]  # the run's chunks, then each leg's own index
    documents, windows = first.indexes["document"].units, first.indexes["bm25"].units
    assert [c.unit for c in documents] == ["document"] * n_docs
    assert all(c.unit == "bm25" and c.end - c.start <= 2000 for c in windows) and len(windows) > n_docs
    assert first.counts["units_document_chunk_cache_misses"] + first.counts["units_document_chunk_cache_hits"] \
        == n_docs
    assert first.indexes["document"].vector_index.ntotal == n_docs
    assert first.indexes["bm25"].vector_index is None  # bm25 reads no vectors: its units are not embedded
    assert first.embedded is None  # no leg searches the run's chunks by vector: they are not embedded
    again = prepare_corpus(experiment, progress=False)
    assert again.counts["units_document_chunk_cache_hits"] == n_docs
    assert again.counts["units_bm25_chunk_cache_hits"] == n_docs
    assert again.counts["units_document_embeddings_computed"] == 0
    assert again.counts["units_document_embeddings_cached"] == n_docs
    found = search_corpus(again, experiment)
    assert all(len(hits) > 0 for hits in found.run.hits.values())
    assert all(set(h.passages) <= {"vector", "bm25"} for hits in found.run.hits.values() for h in hits)


def test_candidates_unit_fused_brings_that_many_documents_per_leg(workspace):
    """A chunk leg lifted to documents: candidates_per_leg 5 counts chunks (searched, the default: often fewer than 5
    documents) or documents (fused: as deep as needed for 5 distinct documents, cut after the 5th)."""
    legs = dict(legs=["postgres_fts", "bm25"], fusion={"strategy": "rrf"}, candidates_per_leg=5, top_k=5,
                leg_params={"postgres_fts": {"query_parser": "or"}, "bm25": {"unit": "document"}})
    searched = keyword_config(workspace, **legs)
    fused = keyword_config(workspace, **legs, candidates_unit="fused")
    assert "candidates_unit" not in searched.run_key_payload()["retrieval"]  # the default keeps old run keys
    assert fused.run_key() != searched.run_key()
    corpus = prepare_corpus(searched, progress=False)
    by_depth = {name: search_corpus(corpus, experiment) for name, experiment in
                (("searched", searched), ("fused", fused))}
    doc_of = {c.chunk_id: c.doc_id for c in by_depth["searched"].units}
    short = 0
    for qid, stages in by_depth["fused"].run.stages.items():
        chunks = stages["leg_postgres_fts"]
        documents = list(dict.fromkeys(doc_of[c] for c in chunks))
        assert len(documents) == 5 or len(chunks) == len(by_depth["searched"].run.stages[qid]["leg_postgres_fts"])
        if len(documents) == 5:
            assert doc_of[chunks[-1]] == documents[-1] and doc_of[chunks[-1]] not in map(doc_of.get, chunks[:-1])
        old = by_depth["searched"].run.stages[qid]["leg_postgres_fts"]
        assert len(old) <= 5 and chunks[:len(old)] == old  # the same ranking, deeper
        short += len({doc_of[c] for c in old}) < 5
        assert len(stages["leg_bm25"]) <= 5  # whole documents: 5 units are 5 documents either way
    assert short > 0  # the old depth did bring fewer than 5 documents for some questions
