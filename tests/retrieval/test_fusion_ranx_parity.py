"""Parity with ranx on real leg outputs (demo set: kbench's vector leg, BM25Okapi from rank_bm25):
normalizations (min-max, zmuv = z-score, rank), weighted sum (``missing: zero`` is ranx's wsum) and RRF.

ranx compiles its numba kernels on first use (minutes on a busy 2-core machine), hence slow."""
from __future__ import annotations

import pytest

from kbench.retrieval.fusion.normalization import normalize
from kbench.retrieval.fusion.rrf import RRFParams, rrf_fuse
from kbench.retrieval.fusion.weighted import WeightedParams, weighted_fuse
from tests.retrieval.leg_outputs import demo_legs

pytestmark = pytest.mark.slow

RANX_NORM = {"min-max": "min-max", "z-score": "zmuv", "rank": "rank"}


def tie_free(ranked):
    """ranx orders a run by score; keep legs whose scores are all distinct so ranks are defined alike."""
    return len({s for _, s in ranked}) == len(ranked)


@pytest.fixture(scope="module")
def runs(shared_cache_workspace):
    from ranx import Run

    legs = demo_legs(str(shared_cache_workspace))
    pairs = [(q.query_id, v, b) for q, v, b in zip(legs.dataset.queries, legs.vector, legs.bm25)
             if len(b) > 1 and tie_free(v) and tie_free(b)]
    assert len(pairs) >= 50
    vector = Run({q: {str(c): s for c, s in v} for q, v, _ in pairs}, name="vector")
    bm25 = Run({q: {str(c): s for c, s in b} for q, _, b in pairs}, name="bm25")
    return pairs, vector, bm25


@pytest.mark.parametrize("ours", ["min-max", "z-score", "rank"])
def test_normalizations_match_ranx(runs, ours):
    from ranx.normalization import min_max_norm, rank_norm, zmuv_norm

    ranx_fn = {"min-max": min_max_norm, "z-score": zmuv_norm, "rank": rank_norm}[ours]
    pairs, vector, _ = runs
    theirs = ranx_fn(vector).to_dict()
    for q, v, _ in pairs:
        mine = normalize([s for _, s in v], ours)
        assert mine == pytest.approx([theirs[q][str(c)] for c, _ in v], abs=1e-9)


@pytest.mark.parametrize("normalization", ["min-max", "z-score", "rank"])
@pytest.mark.parametrize("weight", [0.3, 0.7])
def test_weighted_missing_zero_matches_ranx_wsum(runs, normalization, weight):
    from ranx import fuse

    pairs, vector, bm25 = runs
    theirs = fuse([vector, bm25], norm=RANX_NORM[normalization], method="wsum",
                  params={"weights": [weight, 1 - weight]}).to_dict()
    params = WeightedParams(weight=weight, normalization=normalization, missing="zero")
    for q, v, b in pairs:
        mine = {str(h.chunk_index): h.score for h in weighted_fuse({"vector": v, "bm25": b}, params, 10_000)}
        assert mine.keys() == theirs[q].keys()
        assert [mine[d] for d in sorted(mine)] == pytest.approx([theirs[q][d] for d in sorted(mine)], abs=1e-9)


def test_rrf_matches_ranx(runs):
    from ranx import fuse

    pairs, vector, bm25 = runs
    theirs = fuse([vector, bm25], norm=None, method="rrf", params={"k": 60}).to_dict()
    for q, v, b in pairs:
        mine = {str(h.chunk_index): h.score for h in rrf_fuse({"vector": v, "bm25": b}, RRFParams(k=60), 10_000)}
        assert mine.keys() == theirs[q].keys()
        assert [mine[d] for d in sorted(mine)] == pytest.approx([theirs[q][d] for d in sorted(mine)], abs=1e-12)
