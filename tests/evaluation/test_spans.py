"""Span metrics against a character-set oracle (property tests) and Chroma's formulas on real questions;
chunk-level overlap rules; the span columns of evaluate_rankings and a real MiniLM run."""
from __future__ import annotations

import math
import re
from collections import Counter

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbench.chunking import chunk_corpus
from kbench.config import ChunkingConfig, EvaluationConfig, OverlapRule, load_experiment
from kbench.datasets.spans import load_chroma
from kbench.evaluation.stage import evaluate_rankings, summarize
from kbench.evaluation.relevance import chunk_matches_span, relevant_chunks
from kbench.evaluation.spans import (chunk_ranges, merge_ranges, precision_omega, reference_coverage,
                                     reference_table, span_ranges, span_scores)
from kbench.paths import shared_datasets_dir
from kbench.records import Chunk, Hit, Run, Span

CHROMA = shared_datasets_dir() / "chroma_chunking"

DOCS = ["a", "b"]


# --------------------------------------------------------------------------- oracle
def char_set(items) -> set[tuple[str, int]]:
    return {(x.doc_id, i) for x in items for i in range(x.start, x.end)}


def oracle(retrieved: list[Chunk], spans: list[Span]) -> tuple[float, float, float]:
    c, r = char_set(retrieved), char_set(spans)
    if not r:
        return math.nan, math.nan, math.nan
    return len(c & r) / len(r), (len(c & r) / len(c) if c else 0.0), len(c & r) / len(c | r)


ranges = st.tuples(st.sampled_from(DOCS), st.integers(0, 300), st.integers(0, 120)).map(
    lambda t: (t[0], t[1], t[1] + t[2]))
chunk_lists = st.lists(ranges, max_size=12).map(
    lambda rs: [Chunk(d, n, s, e, "x") for n, (d, s, e) in enumerate(rs)])
span_lists = st.lists(ranges, min_size=1, max_size=5).map(lambda rs: [Span(d, s, e) for d, s, e in rs])


@settings(max_examples=400, deadline=None)
@given(chunk_lists, span_lists)
def test_span_scores_equal_the_character_set_oracle(chunks, spans):
    got = span_scores(chunk_ranges(chunks), span_ranges(spans))
    want = oracle(chunks, spans)
    for g, w in zip((got.recall, got.precision, got.iou), want):
        assert (math.isnan(g) and math.isnan(w)) or g == pytest.approx(w, abs=1e-12)


@settings(max_examples=300, deadline=None)
@given(chunk_lists, span_lists)
def test_precision_omega_equals_oracle_over_touching_chunks(chunks, spans):
    r = char_set(spans)
    touching = [c for c in chunks if char_set([c]) & r]
    omega = char_set(touching)
    want = math.nan if not r else (len(omega & r) / len(omega) if omega else 0.0)
    got = precision_omega(chunks, span_ranges(spans))
    assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(want, abs=1e-12)
    # omega is what retrieving exactly those chunks scores
    if touching:
        assert got == pytest.approx(span_scores(chunk_ranges(touching), span_ranges(spans)).precision)


@settings(max_examples=200, deadline=None)
@given(chunk_lists, span_lists)
def test_reference_coverage_and_scores_are_bounded(chunks, spans):
    cover = reference_coverage(chunk_ranges(chunks), spans)
    assert len(cover) == len(spans) and all(0.0 <= x <= 1.0 for x in cover)
    for s, x in zip(spans, cover):
        if s.end > s.start:
            assert x == pytest.approx(len(char_set(chunks) & char_set([s])) / (s.end - s.start))
    got = span_scores(chunk_ranges(chunks), span_ranges(spans))
    if not math.isnan(got.iou):
        assert got.iou <= min(got.recall, got.precision) + 1e-12


def test_merge_ranges_joins_touching_and_keeps_documents_apart():
    merged = merge_ranges([("a", 5, 10), ("a", 0, 5), ("b", 3, 4), ("a", 12, 12), ("a", 8, 20)])
    assert merged == {"a": [(0, 20)], "b": [(3, 4)]}


def test_nothing_retrieved_scores_zero_not_nan():
    got = span_scores({}, span_ranges([Span("a", 0, 10)]))
    assert (got.recall, got.precision, got.iou) == (0.0, 0.0, 0.0)


# --------------------------------------------------------------------------- Chroma's formulas
def chroma_scores(retrieved: list[Chunk], spans: list[Span]) -> tuple[float, float, float]:
    """Chroma's per-question recall, precision, IoU as its study code computes them (re-derived here):
    numerator = union of chunk∩reference pieces; precision denominator = plain sum of retrieved chunk
    lengths; IoU denominator = that sum + reference characters no retrieved chunk covers."""
    ref = span_ranges(spans)
    pieces = merge_ranges((c.doc_id, max(c.start, s.start), min(c.end, s.end))
                          for c in retrieved for s in spans if c.doc_id == s.doc_id)
    inter = sum(e - s for items in pieces.values() for s, e in items)
    ref_len = sum(e - s for items in ref.values() for s, e in items)
    summed = sum(c.end - c.start for c in retrieved)
    unused = ref_len - inter
    return inter / ref_len, (inter / summed if summed else 0.0), inter / (summed + unused)


def chroma_omega(chunks: list[Chunk], spans: list[Span]) -> float:
    """Chroma's precision-omega: chunks that intersect *or touch* a reference, union with uncovered refs."""
    touching = [c for c in chunks for s in spans
                if c.doc_id == s.doc_id and min(c.end, s.end) >= max(c.start, s.start)]
    pieces = merge_ranges((c.doc_id, max(c.start, s.start), min(c.end, s.end))
                          for c in touching for s in spans if c.doc_id == s.doc_id)
    inter = sum(e - s for items in pieces.values() for s, e in items)
    ref = span_ranges(spans)
    covered = chunk_ranges(touching)
    unused = sum(e - s for items in ref.values() for s, e in items) - inter
    denominator = sum(e - s for items in covered.values() for s, e in items) + unused
    return inter / denominator if inter else 0.0


WORD = re.compile(r"[a-z0-9]+")


def lexical_rankings(dataset, chunks) -> dict[str, list[Hit]]:
    """A real, cheap retriever for tests: rank chunks by shared word counts with the question."""
    bags = [Counter(WORD.findall(c.text.lower())) for c in chunks]
    out = {}
    for q in dataset.queries:
        words = set(WORD.findall(q.text.lower()))
        scores = [sum(min(b[w], 3) for w in words) for b in bags]
        order = sorted(range(len(chunks)), key=lambda i: (-scores[i], i))[:20]
        out[q.query_id] = [Hit(i, float(scores[i])) for i in order]
    return out


@pytest.fixture(scope="module")
def sotu():
    return load_chroma(CHROMA, corpora=["state_of_the_union"])


def chunks_of(dataset, **knobs):
    return chunk_corpus(dataset.documents, ChunkingConfig(**knobs))


def test_matches_chromas_formulas_on_real_questions_with_disjoint_chunks(sotu):
    chunks = chunks_of(sotu, strategy="fixed", chunk_size=700, chunk_overlap=0)
    rankings = lexical_rankings(sotu, chunks)
    assert len(sotu.queries) == 76
    touched_only = 0
    for q in sotu.queries:
        spans = sotu.spans[q.query_id]
        for k in (1, 5, 10):
            top = [chunks[h.chunk_index] for h in rankings[q.query_id][:k]]
            ours = span_scores(chunk_ranges(top), span_ranges(spans))
            assert (ours.recall, ours.precision, ours.iou) == pytest.approx(chroma_scores(top, spans), abs=1e-12)
        ours_omega = precision_omega(chunks, span_ranges(spans))
        if any(c.end == s.start or c.start == s.end for c in chunks for s in spans):
            touched_only += 1
            assert ours_omega >= chroma_omega(chunks, spans) - 1e-12
        else:
            assert ours_omega == pytest.approx(chroma_omega(chunks, spans), abs=1e-12)
    assert touched_only < len(sotu.queries)  # the equal case was actually exercised


def test_overlapping_chunks_are_not_double_counted(sotu):
    chunks = chunks_of(sotu, strategy="fixed", chunk_size=1000, chunk_overlap=200)
    rankings = lexical_rankings(sotu, chunks)
    higher = 0
    for q in sotu.queries:
        spans = sotu.spans[q.query_id]
        top = [chunks[h.chunk_index] for h in rankings[q.query_id][:5]]
        ours = span_scores(chunk_ranges(top), span_ranges(spans))
        recall, precision, iou = chroma_scores(top, spans)
        assert ours.recall == pytest.approx(recall)
        assert ours.precision >= precision - 1e-12 and ours.iou >= iou - 1e-12
        higher += ours.precision > precision + 1e-12
    assert higher > 0  # consecutive windows do get retrieved together on this corpus


# --------------------------------------------------------------------------- overlap rules
def test_overlap_rules_on_hand_made_cases():
    span = Span("a", 100, 140)  # 40 characters
    inside = Chunk("a", 0, 110, 130, "x")  # 20 shared
    touching = Chunk("a", 1, 140, 200, "x")
    elsewhere = Chunk("b", 2, 100, 140, "x")
    assert chunk_matches_span(inside, span, OverlapRule(rule="any"))
    assert not chunk_matches_span(touching, span, OverlapRule(rule="any"))
    assert not chunk_matches_span(elsewhere, span, OverlapRule(rule="any"))
    assert chunk_matches_span(inside, span, OverlapRule(rule="min_chars", value=20))
    assert not chunk_matches_span(inside, span, OverlapRule(rule="min_chars", value=21))
    assert chunk_matches_span(inside, span, OverlapRule(rule="min_fraction", value=0.5))
    assert not chunk_matches_span(inside, span, OverlapRule(rule="min_fraction", value=0.51))
    # a reference shorter than N: covering all of it is enough
    whole = Chunk("a", 3, 90, 150, "x")
    assert chunk_matches_span(whole, span, OverlapRule(rule="min_chars", value=100))
    assert not chunk_matches_span(inside, span, OverlapRule(rule="min_chars", value=100))


def test_overlap_rules_on_real_chunks_are_nested_and_agree_with_omega(sotu):
    chunks = chunks_of(sotu, strategy="fixed", chunk_size=400, chunk_overlap=100)
    by_doc = {"state_of_the_union": list(range(len(chunks)))}
    n_any = n_half = n_chars = 0
    for q in sotu.queries:
        spans = sotu.spans[q.query_id]
        any_ = relevant_chunks(chunks, spans, OverlapRule(rule="any"), by_doc)
        half = relevant_chunks(chunks, spans, OverlapRule(rule="min_fraction", value=0.5), by_doc)
        chars = relevant_chunks(chunks, spans, OverlapRule(rule="min_chars", value=100), by_doc)
        assert half <= any_ and chars <= any_
        assert chars, "every reference is reachable under min_chars (short ones count when covered whole)"
        assert precision_omega([chunks[i] for i in any_], span_ranges(spans)) == pytest.approx(
            precision_omega(chunks, span_ranges(spans)))
        n_any, n_half, n_chars = n_any + len(any_), n_half + len(half), n_chars + len(chars)
    assert n_any > n_chars > 0 and n_any > n_half > 0


# --------------------------------------------------------------------------- evaluate_rankings
def test_evaluate_rankings_span_columns_on_real_questions(sotu):
    chunks = chunks_of(sotu, strategy="fixed", chunk_size=800, chunk_overlap=100)
    rankings = lexical_rankings(sotu, chunks)
    config = EvaluationConfig(k=[1, 5, 10])
    per_query = evaluate_rankings(sotu, chunks, Run.from_hits(rankings, chunks), config)
    for k in (1, 5, 10):
        for name in ("recall", "precision", "iou"):
            assert per_query[f"span_{name}_at_{k}"].between(0, 1).all()
    # recall grows with k; precision-omega does not depend on the ranking
    assert (per_query["span_recall_at_10"] >= per_query["span_recall_at_5"] - 1e-12).all()
    assert (per_query["span_recall_at_5"] >= per_query["span_recall_at_1"] - 1e-12).all()
    assert per_query["span_recall_at_10"].mean() > 0.3  # a lexical retriever finds much of the answers
    row = per_query.iloc[3]
    spans = sotu.spans[row["query_id"]]
    top = [chunks[h.chunk_index] for h in rankings[row["query_id"]][:5]]
    assert row["span_iou_at_5"] == pytest.approx(span_scores(chunk_ranges(top), span_ranges(spans)).iou)
    assert row["span_precision_omega"] == pytest.approx(precision_omega(chunks, span_ranges(spans)))
    # the miss columns line up with the references: hit rank > 0 exactly when some of it was retrieved
    for _, r in per_query.iterrows():
        assert len(r["spans_hit"]) == len(r["spans_covered"]) == len(r["span_refs"])
        for rank, covered in zip(r["spans_hit"], r["spans_covered"]):
            assert (rank > 0) == (covered > 0)
    metrics = summarize(per_query)
    assert {"span_recall_at_5", "span_precision_omega", "chunk_ndcg_at_10"} <= metrics.keys()


def test_span_metrics_from_a_real_minilm_run(workspace, config_for):
    from kbench.runner import run_experiment

    config = load_experiment(config_for(
        dataset={"name": "chroma_chunking", "subset": ["chatlogs"]},
        chunking={"strategy": "fixed", "chunk_size": 1000, "chunk_overlap": 0},
        retrieval={"legs": ["vector"], "top_k": 10, "latency": "batch"},
        evaluation={"k": [5, 10]},
    ))
    result = run_experiment(config, progress=False, log=False)
    m = result.metrics
    assert result.counts["queries"] == 56 and result.counts["chunks"] == 40
    assert 0 < m["span_precision_at_10"] < m["span_precision_at_5"] <= m["span_precision_omega"]
    assert m["span_recall_at_5"] <= m["span_recall_at_10"] and m["span_recall_at_10"] > 0.5
    saved = pd.read_parquet(result.run_dir / "per_query.parquet")
    refs = reference_table(saved, result.dataset)  # what a notebook shows: one row per reference span
    assert len(refs) == sum(len(s) for s in result.dataset.spans.values())
    assert ((refs["hit_rank"] == 0) == (refs["covered"] == 0)).all()
    single = saved[saved["span_refs"].map(len) == 1].set_index("query_id")["span_recall_at_10"]
    covered = refs.set_index("query_id").loc[single.index, "covered"]
    assert len(single) > 10 and (covered - single).abs().max() < 1e-12
    doc = result.dataset.documents[0].text
    row = refs.iloc[0]
    assert row["text"] == doc[row["start"]:row["end"]] and row["question"]
