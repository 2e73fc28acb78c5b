"""Filters: jsonb containment (checked against PostgreSQL's own @>), masks over real demo chunks, the
The Chroma RAG fields, and that every leg sees the same mask."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

from kbench.chunking import chunk_corpus
from kbench.config import ChunkingConfig, DatasetConfig, FilterConfig
from kbench.datasets import load_dataset
from kbench.records import Chunk, Document, Hit, Query
from kbench.retrieval.filters import drop_query_document, filter_mask, jsonb_contains

# (container, contained, what PostgreSQL's documentation / behaviour says)
CONTAINMENT_CASES = [
    ({"a": 1, "b": 2}, {"a": 1}, True),
    ({"a": 1}, {"a": 1.0}, True),  # numbers compare by value
    ({"a": 1}, {"a": "1"}, False),
    ({"a": True}, {"a": 1}, False),
    ({"a": None}, {"a": None}, True),
    ({"a": 1}, {}, True),
    ({}, {"a": 1}, False),
    ({"a": {"b": {"c": 1, "d": 2}}}, {"a": {"b": {"c": 1}}}, True),
    ({"a": {"b": 1}}, {"a": {"b": 1, "c": 2}}, False),
    ({"tags": ["x", "y", "z"]}, {"tags": ["z", "x"]}, True),
    ({"tags": ["x", "y"]}, {"tags": ["x", "x"]}, True),  # duplicates do not matter
    ({"tags": ["x"]}, {"tags": "x"}, False),  # the array-holds-scalar exception is top level only
    ({"tags": "x"}, {"tags": ["x"]}, False),
    ({"tags": ["x", ["y", "w"]]}, {"tags": [["w"]]}, True),
    ({"tags": ["x", ["y", "w"]]}, {"tags": ["w"]}, False),  # nested arrays are not flattened
    ({"a": [{"b": 1, "c": 2}, {"d": 3}]}, {"a": [{"b": 1}]}, True),
    ({"a": [{"b": 1}, {"c": 2}]}, {"a": [{"b": 1, "c": 2}]}, False),  # one element must hold it all
    ({"a": []}, {"a": []}, True),
    ({"a": [1, 2]}, {"a": []}, True),
    ({"a": {}}, {"a": []}, False),
    (["a", "b"], "a", True),  # top level: an array contains a primitive it holds
    (["a", "b"], ["b"], True),
    ("a", ["a"], False),
    ("a", "a", True),
    ([1, [1, 3]], [1, 3], False),  # PostgreSQL docs' example
    ([1, 2, [1, 3]], [[1, 3]], True),
    ({"product": "PostgreSQL", "version": 9.4, "jsonb": True}, {"version": 9.4}, True),
    ({"a": 1.5}, {"a": 1.50}, True),
    ({"a": "é"}, {"a": "é"}, True),
]


@pytest.mark.parametrize("container, contained, expected", CONTAINMENT_CASES)
def test_jsonb_contains_follows_postgres_rules(container, contained, expected):
    assert jsonb_contains(container, contained) is expected


@pytest.mark.pg
def test_jsonb_contains_agrees_with_postgres():
    from kbench.store.pgserver import pg_connection

    datadir = Path(tempfile.gettempdir()) / f"kbench-filters-pg-{os.getpid()}"
    try:
        with pg_connection(datadir=datadir) as conn, conn.cursor() as cur:
            for container, contained, expected in CONTAINMENT_CASES:
                cur.execute("SELECT %s::jsonb @> %s::jsonb", (json.dumps(container), json.dumps(contained)))
                assert cur.fetchone()[0] is expected, (container, contained)
    finally:
        shutil.rmtree(datadir, ignore_errors=True)


@pytest.fixture(scope="module")
def demo():
    dataset = load_dataset(DatasetConfig(name="demo"))
    chunks = chunk_corpus(dataset.documents, ChunkingConfig(strategy="fixed", chunk_size=600, chunk_overlap=100))
    return dataset, chunks, {d.doc_id: d for d in dataset.documents}


def test_no_filter_is_no_mask(demo):
    _, chunks, docs = demo
    assert filter_mask(chunks, docs, FilterConfig()) is None
    assert filter_mask(chunks, docs, FilterConfig(exclude_query_document=True)) is None  # per query, not a mask


def test_doc_types_source_ids_and_doc_ids_on_demo(demo):
    _, chunks, docs = demo
    code = filter_mask(chunks, docs, FilterConfig(doc_types=["code"]))
    assert code.any() and not code.all()
    assert all((docs[c.doc_id].doc_type == "code") == keep for c, keep in zip(chunks, code))
    source = next(iter({d.source_id for d in docs.values()}))
    by_source = filter_mask(chunks, docs, FilterConfig(source_ids=[source]))
    assert all((docs[c.doc_id].source_id == source) == keep for c, keep in zip(chunks, by_source))
    one = chunks[0].doc_id
    by_id = filter_mask(chunks, docs, FilterConfig(doc_ids=[one]))
    assert by_id.sum() == sum(c.doc_id == one for c in chunks)
    both = filter_mask(chunks, docs, FilterConfig(doc_types=["code"], doc_ids=[one]))
    assert np.array_equal(both, by_id & code)  # filters AND


def test_metadata_containment_reads_document_and_chunk_metadata(demo):
    _, chunks, docs = demo
    path = chunks[5].doc_id
    mask = filter_mask(chunks, docs, FilterConfig(metadata={"path": path}))  # the demo loader sets metadata.path
    assert mask.sum() == sum(c.doc_id == path for c in chunks) > 0
    chunker = filter_mask(chunks, docs, FilterConfig(metadata={"chunker": "fixed"}))  # chunk-level metadata
    assert chunker.all()


def test_category_and_tags_of_chroma_rag():
    docs = {
        "a": Document("a", "x", metadata={"category": "Engineering", "tags": ["docker", "production"]}),
        "b": Document("b", "x", metadata={"category": "Engineering/Security", "tags": "docker, staging"}),
        "c": Document("c", "x", metadata={}),
    }
    chunks = [Chunk(d, 0, 0, 1, "x") for d in "abc"]
    assert filter_mask(chunks, docs, FilterConfig(category="Engineering")).tolist() == [True, False, False]
    assert filter_mask(chunks, docs, FilterConfig(tags=["docker"])).tolist() == [True, True, False]
    assert filter_mask(chunks, docs, FilterConfig(tags=["docker", "production"], tags_match="all")).tolist() == [
        True, False, False]
    assert filter_mask(chunks, docs, FilterConfig(tags=["production", "staging"])).tolist() == [True, True, False]


def test_drop_query_document():
    chunks = [Chunk("a.py", 0, 0, 1, "x"), Chunk("b.py", 0, 0, 1, "y"), Chunk("a.py", 1, 1, 2, "z")]
    hits = [Hit(0, 0.9), Hit(1, 0.8), Hit(2, 0.7)]
    assert [h.chunk_index for h in drop_query_document(hits, Query("q", "x", {"doc_id": "a.py"}), chunks)] == [1]
    assert drop_query_document(hits, Query("q", "x"), chunks) == hits
