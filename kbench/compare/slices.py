"""Comparisons per slice: the same paired tests inside each group of queries, corrected together.

    table = compare_by_slice(runs, "doc_type", baseline="vector", metrics=["doc_ndcg_at_10"])

A slice is a per-query label column ``slice_<key>`` (``evaluation.slices``). For each label with at least
``min_queries`` queries the runs are compared on those queries only (kbench.compare.compare_scores), and the
chosen test's p-values of every (slice, config, metric) row are corrected in one family with the comparison's
correction, so "fusion helps docs and hurts code" is one table whose stars mean what they say.

The ``language`` slice needs no asking: when the runs' questions hold two or more languages, each a meaningful share
(kbench.language.census), ``language_table`` compares per language and the report and ``kbench compare`` show it.
"""
from __future__ import annotations

from dataclasses import replace

import pandas as pd

from kbench.compare.compare import CompareError, Comparison, RunScores, compare_scores
from kbench.evaluation.significance import adjust_p_values
from kbench.language.census import MEANINGFUL_COUNT, MEANINGFUL_SHARE
from kbench.language.detect import UNDETERMINED

LANGUAGE = "language"


def compare_by_slice(runs: list[RunScores], key: str, *, correction: str = "holm", test: str = "randomization",
                     alpha: float = 0.05, min_queries: int = 5, **kwargs) -> pd.DataFrame:
    """One row per (slice label, config, metric) as in ``Comparison.table``, plus ``slice``; p_adjusted and
    significant over the whole table. Labels with fewer than ``min_queries`` queries are left out."""
    column = key if key.startswith("slice_") else f"slice_{key}"
    for r in runs:
        if column not in r.per_query:
            raise CompareError(f"{r.label}: per-query scores have no {column!r}; run it with "
                               f"evaluation.slices: [{column[6:]}]")
    labels = runs[0].per_query[column].value_counts()
    tables = []
    for label, count in labels.items():
        if count < min_queries:
            continue
        subset = [replace(r, per_query=r.per_query[r.per_query[column] == label]) for r in runs]
        part = compare_scores(subset, test=test, correction="none", alpha=alpha, **kwargs).table
        tables.append(part.assign(slice=label))
    if not tables:
        raise CompareError(f"no slice of {column!r} has {min_queries} queries or more (labels: {dict(labels)})")
    table = pd.concat(tables, ignore_index=True)
    table["p_adjusted"] = adjust_p_values(table[f"p_{test}"].to_numpy(), correction)
    table["significant"] = table["p_adjusted"] < alpha
    return table[["slice"] + [c for c in table.columns if c != "slice"]]


def meaningful_languages(runs: list[RunScores]) -> list[str]:
    """The questions' languages (the first run's ``slice_language``) that each hold at least MEANINGFUL_SHARE
    and MEANINGFUL_COUNT of the questions; [] when a run has no such column."""
    if not runs or any(f"slice_{LANGUAGE}" not in r.per_query for r in runs):
        return []
    counts = runs[0].per_query[f"slice_{LANGUAGE}"].value_counts()
    total = int(counts.sum())
    return [str(code) for code, n in counts.items()
            if code != UNDETERMINED and n >= MEANINGFUL_COUNT and n >= MEANINGFUL_SHARE * total]


def language_table(comparison: Comparison) -> pd.DataFrame | None:
    """``compare_by_slice`` on ``language`` with the comparison's own test, correction and metrics, when two or
    more languages hold a meaningful share of the questions; else None (one language: nothing to split)."""
    if len(meaningful_languages(comparison.runs)) < 2:
        return None
    return compare_by_slice(comparison.runs, LANGUAGE, baseline=comparison.baseline, metrics=comparison.metrics,
                            test=comparison.test, correction=comparison.correction, alpha=comparison.alpha,
                            min_queries=MEANINGFUL_COUNT)
