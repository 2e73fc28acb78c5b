"""postgres_fts with ORed words through the inverted index: the same documents and bit-identical scores as
ranking each matching document with pg_tsearch's ts_rank / ts_rank_cd, on real SciFact claims."""
from __future__ import annotations

import numpy as np
import pytest

from kbench import ChunkingConfig, DatasetConfig, chunked_corpus
from kbench.retrieval.contracts import SearchContext
from kbench.retrieval.legs.postgres_fts import PostgresFtsLeg, PostgresFtsParams
from kbench.retrieval.text.pg_or_index import OrRankIndex
from kbench.retrieval.text.pg_tsearch import RANK_FUNCTIONS, TextSearchConfig, matches
from tests.conftest import SCIFACT

CLAIMS = 40  # of SciFact's 300 test claims; each matches about a third of the 5,183 abstracts


@pytest.fixture(scope="module")
def scifact():
    if not (SCIFACT / "corpus.jsonl").is_file():
        pytest.skip("SciFact not in ../shared/datasets")
    dataset, chunks = chunked_corpus(DatasetConfig(name="scifact"), ChunkingConfig(strategy="none"))
    config = TextSearchConfig("english")
    vectors = [config.to_tsvector(c.text) for c in chunks]
    claims = [config.or_tsquery(q.text) for q in dataset.queries[:CLAIMS]]
    return chunks, vectors, claims, OrRankIndex(vectors)


@pytest.mark.parametrize("rank_function, normalization", [  # 59 = bits 1, 2, 8, 16 and 32, applied in turn
    ("ts_rank_cd", 0), ("ts_rank_cd", 59), ("ts_rank", 0), ("ts_rank", 32), ("ts_rank", 59),
])
def test_index_scores_are_bit_identical_to_ranking_each_document(scifact, rank_function, normalization):
    _, vectors, claims, index = scifact
    rank = RANK_FUNCTIONS[rank_function]
    compared = 0
    for query in claims:
        assert OrRankIndex.handles(query, rank_function, normalization)
        ids, scores = index.search(query, rank_function, normalization)
        expected_ids = [i for i, v in enumerate(vectors) if matches(v, query)]
        assert ids.tolist() == expected_ids
        expected = np.array([rank(vectors[i], query, normalization=normalization) for i in expected_ids])
        assert np.array_equal(scores, expected)  # exact equality, float for float
        compared += len(ids)
    assert compared > 10_000


def test_cover_distance_normalization_takes_the_per_document_path(scifact):
    query = scifact[2][0]
    assert not OrRankIndex.handles(query, "ts_rank_cd", 4)
    assert OrRankIndex.handles(query, "ts_rank", 4)  # bit 4 means nothing to ts_rank


def test_the_leg_returns_the_same_ranking_with_and_without_the_index(scifact):
    chunks, _, _, _ = scifact
    dataset_queries = chunked_corpus(DatasetConfig(name="scifact"), ChunkingConfig(strategy="none"))[0].queries[:CLAIMS]
    leg = PostgresFtsLeg(SearchContext(chunks=chunks), PostgresFtsParams(query_parser="or"))
    mask = np.ones(len(chunks), dtype=bool)
    mask[::3] = False  # a filter: masked chunks never come back
    fast = leg.search(dataset_queries, None, 100, mask)
    leg.or_index = None
    slow = leg.search(dataset_queries, None, 100, mask)
    assert fast == slow
    assert all(mask[i] for result in fast for i, _ in result)
