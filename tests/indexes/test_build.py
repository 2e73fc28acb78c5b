"""One way to build an index (kbench/indexes/build.py): what each leg's unit names, and every kind built by
``build_index`` from the sections it needs."""
from __future__ import annotations

from kbench.config import RetrievalConfig, load_experiment
from kbench.datasets import load_dataset
from kbench.indexes import CHUNK, UNIT_KINDS, BuildLog, IndexSections, IndexSpec, build_index, unit_names
from kbench.pipeline import prepare_corpus, run_pipeline
from kbench.records import Document
from tests.conftest import make_config


def test_each_leg_asks_for_its_index_by_name():
    config = RetrievalConfig(legs=["vector", "bm25", "postgres_fts"], fusion={"strategy": "rrf"},
                             leg_params={"bm25": {"unit": "markdown"}, "postgres_fts": {"unit": {"strategy": "none"}}})
    specs, of_leg = config.index_specs()
    assert of_leg == {"vector": CHUNK, "bm25": "bm25", "postgres_fts": "document"}  # {strategy: none} = document
    assert [(s.name, s.kind, s.embed) for s in specs] == [(CHUNK, CHUNK, True), ("bm25", "chunking", False),
                                                          ("document", "chunking", False)]
    assert config.leg_index("bm25") == "bm25"
    shared = RetrievalConfig(legs=["vector", "bm25"], fusion={"strategy": "rrf"},
                             leg_params={"vector": {"unit": "document"}, "bm25": {"unit": "document"}})
    specs, _ = shared.index_specs()
    assert [(s.name, s.embed) for s in specs] == [(CHUNK, False), ("document", True)]  # one index, embedded
    assert {"chunk", "code_example", "document"} <= set(unit_names())
    assert "chunking" in UNIT_KINDS.names()  # the kind behind a chunker name, never a value a leg writes


def test_build_index_takes_sections_not_the_experiment(tmp_path):
    experiment = load_experiment({"dataset": {"name": "demo"}, "workspace": str(tmp_path)})
    sections = IndexSections(experiment.dataset, experiment.chunking, experiment.enrichment, experiment.embedding,
                             experiment.store)
    dataset, log = load_dataset(experiment.dataset), BuildLog()
    chunks = build_index(IndexSpec(CHUNK, CHUNK), dataset, sections, workspace=tmp_path, log=log)
    documents = build_index(IndexSpec("document", "document"), dataset, sections, workspace=tmp_path, log=log)
    assert chunks.vector_index is None and chunks.embedded is None  # no leg reads vectors: nothing embedded
    assert all(u.unit == "" for u in chunks.units) and log.counts["chunks"] == len(chunks.units)
    assert [u.chunk_id for u in documents.units] == [f"{d.doc_id}#document:0" for d in dataset.documents]
    assert log.counts["units_document_chunks"] == len(dataset.documents)
    assert documents.made_by == {"kind": "document"}
