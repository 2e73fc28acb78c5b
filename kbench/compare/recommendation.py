"""A comparison's recommendation: its runs as the plain records ``kbench.evaluation.recommend`` reads, tied with
the comparison's own test, correction and alpha, so the recommendation's headline tie is the ranking's.

    found = recommend_comparison(comparison, RecommendConfig(guards=["recall_at_10"]))
    print("\\n".join(found.lines()))
"""
from __future__ import annotations

import json

from kbench.compare.compare import Comparison, RunScores
from kbench.evaluation.recommend import ConfigRecord, Recommendation, RecommendConfig, recommend
from kbench.tracking import tags as tag


def config_record(run: RunScores) -> ConfigRecord:
    """A compared run as a plain record: its numeric per-query columns and its logged run metrics."""
    frame = run.per_query
    return ConfigRecord(run.label, {c: frame[c].to_numpy(dtype=float) for c in frame.columns
                                    if frame[c].dtype.kind in "fi"}, dict(run.summary))


def recommend_comparison(comparison: Comparison, config: RecommendConfig | None = None) -> Recommendation:
    return recommend([config_record(r) for r in comparison.runs], comparison.headline, config or RecommendConfig(),
                     test=comparison.test, correction=comparison.correction, alpha=comparison.alpha,
                     n_resamples=comparison.n_resamples, seed=comparison.seed)


def recommend_by_tag(config: RecommendConfig) -> str:
    """What a sweep recommended by, as its parent run's tag ``kbench.sweep.recommend_by`` (JSON)."""
    return json.dumps(config.model_dump(mode="json"), sort_keys=True)


def sweep_recommend_config(parent_tags: dict[str, str]) -> RecommendConfig | None:
    """The ``recommend`` section a sweep ended with (its parent's tag), or None for a sweep logged before it."""
    text = parent_tags.get(tag.SWEEP_RECOMMEND_BY)
    if not text:
        return None
    try:
        return RecommendConfig(**json.loads(text))
    except (ValueError, TypeError):
        return None
