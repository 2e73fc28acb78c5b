"""Properties (hypothesis) of chunkers, fusions, normalizations and metrics under hostile numbers and text.

- Chunkers: any text, including empty, whitespace-only, control characters, one 20,000-character word and
  mixed line endings: every chunk is a non-empty range inside the document, and for the chunkers that cut
  (not join) pieces ``text[start:end]`` is the chunk.
- Fusions and normalizations: leg scores at the ends of the float range (±1e308, subnormals, equal scores):
  every fused score is a number (never NaN), hits are sorted best first, unique and at most top_k. A leg
  score that is NaN or infinite is never passed on as a NaN in a ranking.
- Metrics: any grades (up to 2**40) and any cutoff (1 to 10**9): a finite value in [0, 1]; perfect rankings
  score 1 on recall, nDCG, MRR and hit rate.

Example counts stay modest: CPU is shared.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbench.chunking.registry import CHUNKERS
from kbench.evaluation.metrics import METRICS
from kbench.records import Document
from kbench.retrieval.fusion.normalization import NORMALIZATIONS, normalize
from kbench.retrieval.registry import FUSIONS

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ------------------------------------------------------------------ chunkers
HOSTILE_TEXT = st.one_of(
    st.text(max_size=400),
    st.just(""), st.just(" \n\t\r\n  "), st.just("\x00\x01\x02 \x7f"),
    st.builds(lambda n: "x" * n, st.integers(1, 20_000)),  # one word longer than any chunk
    st.lists(st.sampled_from(["\r\n", "\n", "\r", "# h\n", "```\n", "a", "é", "\u200b", "😀", " "]),
             max_size=300).map("".join),
)
SMALL_PARAMS = {"chunk_size": 60, "chunk_overlap": 10, "max_chars": 60, "min_chars": 5, "max_tokens": 30,
                "target_chars": 60, "tokens_per_chunk": 30, "token_overlap": 5, "window": 60}

CHUNKER_PARAMS: dict[str, object] = {}
for name in CHUNKERS.names():
    entry = CHUNKERS.get(name)
    fields = getattr(entry.params, "model_fields", {})
    kwargs = {k: v for k, v in SMALL_PARAMS.items() if k in fields}
    try:
        CHUNKER_PARAMS[name] = entry.params(**kwargs)
    except ValueError:
        CHUNKER_PARAMS[name] = entry.params()
HEAVY = {"fixed_tokens"}  # loads a tokenizer per call: tests/chunking covers it
SAME_TEXT = {"fixed", "recursive", "markdown", "paragraph", "none"}  # text == document.text[start:end]


@pytest.mark.parametrize("name", sorted(set(CHUNKER_PARAMS) - HEAVY))
@SETTINGS
@given(text=HOSTILE_TEXT, path=st.sampled_from(["a.md", "b.py", "c.txt", "d"]))
def test_chunk_offsets_hold_on_hostile_text(name, text, path):
    document = Document(doc_id="d", text=text, title="", url=path, metadata={"path": path})
    chunks = CHUNKERS.get(name).impl(document, CHUNKER_PARAMS[name])
    for chunk in chunks:
        assert 0 <= chunk.start < chunk.end <= len(text), (name, chunk.start, chunk.end, len(text))
        assert chunk.text.strip() and text[chunk.start:chunk.end].strip(), name
        if name in SAME_TEXT or chunk.metadata.get("merged_pieces") == 1:  # others may join pieces with "\n\n"
            assert text[chunk.start:chunk.end] == chunk.text, name


# ------------------------------------------------------------------ fusions and normalizations
EXTREME = st.one_of(st.floats(allow_nan=False, allow_infinity=False),
                    st.sampled_from([0.0, -0.0, 1e308, -1e308, 5e-324, -5e-324, 1.0, 1.0 + 2**-52]))
NON_FINITE = st.sampled_from([math.nan, math.inf, -math.inf])


@st.composite
def leg_lists(draw, scores=EXTREME, legs=("vector", "bm25")):
    out = {}
    for leg in legs:
        chunk_ids = draw(st.lists(st.integers(0, 40), max_size=15, unique=True))
        values = sorted((draw(scores) for _ in chunk_ids), key=lambda s: -s if s == s else math.inf)
        out[leg] = list(zip(chunk_ids, values))
    return out


def fusion_params(name: str):
    return FUSIONS.get(name).params()


def check_hits(hits, top_k: int) -> None:
    assert len(hits) <= top_k
    assert len({h.chunk_index for h in hits}) == len(hits)
    scores = [h.score for h in hits]
    assert not any(math.isnan(s) for s in scores), scores
    assert scores == sorted(scores, reverse=True), scores


@pytest.mark.parametrize("name", sorted(FUSIONS.names()))
@SETTINGS
@given(legs=leg_lists(), top_k=st.integers(1, 50))
def test_fusion_of_extreme_finite_scores_is_sorted_and_never_nan(name, legs, top_k):
    if name == "none":
        legs = {"vector": legs["vector"]}
    check_hits(FUSIONS.get(name).impl(legs, fusion_params(name), top_k), top_k)


@pytest.mark.parametrize("name", sorted(FUSIONS.names()))
@SETTINGS
@given(legs=leg_lists(scores=st.one_of(EXTREME, NON_FINITE)), top_k=st.integers(1, 50))
def test_fusion_never_passes_a_nan_into_a_ranking(name, legs, top_k):
    if name == "none":
        legs = {"vector": legs["vector"]}
    try:
        hits = FUSIONS.get(name).impl(legs, fusion_params(name), top_k)
    except ValueError as e:  # refusing a non-finite leg score is allowed, with the reason
        assert "finite" in str(e) or "NaN" in str(e), e
        return
    check_hits(hits, top_k)


@pytest.mark.parametrize("method", sorted(NORMALIZATIONS))
@SETTINGS
@given(scores=st.lists(EXTREME, max_size=30))
def test_normalization_of_extreme_finite_scores_is_finite_and_keeps_the_order(method, scores):
    scores = sorted(scores, reverse=True)
    out = normalize(scores, method)
    assert out.shape == (len(scores),) and np.isfinite(out).all(), (scores, out)
    assert all(out[i] >= out[i + 1] for i in range(len(out) - 1)), (scores, out)


# ------------------------------------------------------------------ metrics
@st.composite
def judged_rankings(draw):
    """A pool of judged items (grade 0 = judged not relevant, up to 2**40) and a ranking of some of them."""
    pool = draw(st.lists(st.integers(0, 2**40), max_size=40))
    relevant = [g for g in pool if g > 0]
    order = draw(st.permutations(range(len(pool))))
    ranked = [pool[i] for i in order[:draw(st.integers(0, len(pool)))]]
    return ranked, relevant


@pytest.mark.parametrize("metric", sorted(METRICS))
@SETTINGS
@given(judged=judged_rankings(), k=st.one_of(st.integers(1, 60), st.just(10**9)))
def test_a_metric_is_a_finite_number_in_0_1(metric, judged, k):
    ranked, relevant = judged
    value = METRICS[metric](ranked, relevant, k)
    assert isinstance(value, float) and math.isfinite(value) and 0.0 <= value <= 1.0 + 1e-12, value


@pytest.mark.parametrize("metric", ["recall", "ndcg", "mrr", "hit_rate", "map"])
@SETTINGS
@given(relevant=st.lists(st.integers(1, 2**40), min_size=1, max_size=20), k=st.integers(20, 10**9))
def test_a_perfect_ranking_scores_1(metric, relevant, k):
    ranked = sorted(relevant, reverse=True)
    assert METRICS[metric](ranked, relevant, k) == pytest.approx(1.0, rel=1e-12)
