"""archon_code_examples in the DuckDB mirror: a run with the code-example index writes one row per block (code,
summary, language, page, offsets, the vector the leg searched), and a re-run replaces them."""
from __future__ import annotations

import duckdb
import numpy as np

from kbench.config import load_experiment
from kbench.pipeline import prepare_corpus
from kbench.store.code_examples import code_examples_collection
from tests.conftest import make_config


def test_a_duckdb_run_writes_the_code_example_collection(workspace):
    experiment = load_experiment(make_config(
        workspace, store={"backend": "duckdb"}, retrieval={"legs": ["code_examples"], "top_k": 10},
        enrichment={"code_examples": {"enabled": True, "summary": "none"}}))
    for _ in range(2):  # the second run replaces the collection's rows, never adds to them
        corpus = prepare_corpus(experiment, progress=False)
        corpus.close()
    index = corpus.indexes["code_example"]
    assert corpus.counts["code_examples_stored"] == 20
    collection = code_examples_collection(experiment.dataset, experiment.enrichment.code_examples,
                                          corpus.embedder.cache.namespace)
    path = experiment.store.duckdb_path(workspace)
    with duckdb.connect(str(path), read_only=True) as con:
        rows = con.execute("SELECT page_id, chunk_number, content, summary, language, code_start, code_end, "
                           "embedding_384, embedding_dimension FROM archon_code_examples WHERE collection = ? "
                           "ORDER BY page_id, chunk_number", [collection]).fetchall()
        (pages,) = con.execute("SELECT count(*) FROM archon_crawled_pages").fetchone()
    assert len(rows) == 20 and pages == 0  # the index alone: no page was embedded or stored
    texts = {d.doc_id: d.text for d in corpus.dataset.documents}
    units = {(u.doc_id, u.chunk_number): (row, u) for row, u in enumerate(index.units)}
    for page, number, content, summary, language, start, end, vector, dim in rows:
        row, unit = units[(page, number)]
        assert texts[page][start:end] == content == unit.text and (start, end) == (unit.start, unit.end)
        assert summary is None and language == unit.metadata["language"] and dim == 384
        np.testing.assert_allclose(np.asarray(vector, np.float32), index.vectors[row], atol=1e-7)
