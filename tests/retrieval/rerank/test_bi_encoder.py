"""bi_encoder: mpnet rescoring of a tiny real candidate set, through the embedding cache."""
from __future__ import annotations

import numpy as np
import pytest

from kbench.chunking import chunk_corpus
from kbench.config import ChunkingConfig, DatasetConfig, OverlapRule
from kbench.datasets import load_dataset
from kbench.embedding.models import ModelNotInstalledError, resolve_model_path
from kbench.evaluation.relevance import chunk_matches_span
from kbench.records import Hit
from kbench.retrieval.registry import RERANKERS, SearchContext


@pytest.fixture(scope="module")
def mpnet_path():
    try:
        return resolve_model_path("all-mpnet-base-v2")
    except ModelNotInstalledError as e:
        pytest.skip(f"all-mpnet-base-v2 is not prepared here: {e}")


@pytest.mark.slow  # mpnet loads slowly (~420 MB) and embeds 1-4 passages/s here
def test_mpnet_puts_the_answer_first_with_its_own_cosines_and_caches_candidates(mpnet_path, workspace):
    dataset = load_dataset(DatasetConfig(name="demo"))
    chunks = chunk_corpus(dataset.documents, ChunkingConfig(strategy="fixed", chunk_size=600, chunk_overlap=100))
    query = dataset.queries[1]  # which port lumend exposes metrics on
    spans = dataset.spans[query.query_id]
    answer = next(i for i, c in enumerate(chunks) if any(chunk_matches_span(c, s, OverlapRule()) for s in spans))
    others = [i for i, c in enumerate(chunks) if c.doc_id.startswith("sdk/")][:2]  # code, not about metrics
    hits = [Hit(i, 0.9 - 0.1 * r, leg_scores={"vector": 0.9 - 0.1 * r}, leg_ranks={"vector": r + 1},
                match_type="vector") for r, i in enumerate(others + [answer])]

    entry = RERANKERS.get("bi_encoder")
    reranker = entry.impl(SearchContext(chunks=chunks, workspace=workspace), entry.params(candidate_multiplier=1))
    out = reranker.rerank(query.text, hits, top_k=3)
    assert out[0].chunk_index == answer and out[0].leg_ranks["first_stage"] == 3
    assert reranker.cache_misses + reranker.cache_hits == 3

    model = reranker.embedder.encoder.model  # the same SentenceTransformer, called directly (no cache)
    q = model.encode([query.text], normalize_embeddings=True)[0]
    docs = model.encode([chunks[h.chunk_index].text for h in out], normalize_embeddings=True)
    assert [h.score for h in out] == pytest.approx((docs @ q).tolist(), abs=1e-4)

    again = reranker.rerank(query.text, hits, top_k=3)
    assert reranker.cache_hits >= 3  # the second pass read every candidate from the cache
    assert [h.chunk_index for h in again] == [h.chunk_index for h in out]
    assert np.allclose([h.score for h in again], [h.score for h in out], atol=1e-6)
