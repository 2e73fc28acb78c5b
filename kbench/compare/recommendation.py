"""A comparison's recommendation: its runs as the plain records ``kbench.evaluation.recommend`` reads, tested at
the comparison's alpha.

    found = recommend_comparison(comparison, RecommendConfig(margin=0.02, guards=["recall_at_10"]))
    print("\\n".join(found.lines()))
"""
from __future__ import annotations

import json

from pydantic import ValidationError

from kbench.compare.compare import Comparison, RunScores, headline_metric
from kbench.compare.evidence import comparison_evidence
from kbench.errors import ConfigError, format_error
from kbench.evaluation.directions import lower_is_better
from kbench.evaluation.recommend import ConfigRecord, Evidence, Recommendation, RecommendConfig, recommend
from kbench.tracking import tags as tag


def config_record(run: RunScores) -> ConfigRecord:
    """A compared run as a plain record: its numeric per-query columns and its logged run metrics."""
    frame = run.per_query
    return ConfigRecord(run.label, {c: frame[c].to_numpy(dtype=float) for c in frame.columns
                                    if frame[c].dtype.kind in "fi"}, dict(run.summary))


def recommendation_headline(comparison: Comparison) -> str:
    """The first compared quality metric (a comparison ranked on a latency still recommends by quality), else
    the runs' own headline (nDCG@10 of the finest level)."""
    for metric in comparison.metrics:
        if not lower_is_better(metric) and metric in comparison.runs[0].per_query:
            return metric
    return headline_metric(c for c in comparison.runs[0].per_query.columns
                           if comparison.runs[0].per_query[c].dtype.kind in "fi") or comparison.headline


def recommend_comparison(comparison: Comparison, config: RecommendConfig | None = None, *,
                         evidence: Evidence | None = None, alpha: float | None = None,
                         confidence: str = "") -> Recommendation:
    """The recommendation over a comparison's runs, at its alpha (or ``alpha``: a share of it, over several sets or
    looks, with ``confidence`` in words). No line calls a config possibly as good that the comparison's ranking,
    printed beside it, calls worse than the best; ``evidence`` defaults to what the runs logged
    (``compare.evidence``)."""
    headline = recommendation_headline(comparison)
    found = recommend([config_record(r) for r in comparison.runs], headline, config or RecommendConfig(),
                      alpha=comparison.alpha if alpha is None else alpha, shown_worse=ranked_worse(comparison, headline),
                      evidence=evidence if evidence is not None else comparison_evidence(comparison),
                      confidence=confidence)
    if found.best is not None and found.shown_worse and found.best != comparison.ranking(headline).iloc[0]["config"]:
        # a budget left the ranking's best out: its "worse than the best" is against another config
        found = recommend([config_record(r) for r in comparison.runs], headline, config or RecommendConfig(),
                          alpha=comparison.alpha if alpha is None else alpha, evidence=found.evidence,
                          confidence=confidence)
    return found


def ranked_worse(comparison: Comparison, headline: str) -> list[str] | None:
    """The configs the comparison's ranking on ``headline`` calls worse than the best (None: it does not rank on
    it)."""
    if headline not in comparison.metrics:
        return None
    ranking = comparison.ranking(headline)
    return [str(c) for c, verdict in zip(ranking["config"], ranking["vs_best"]) if verdict == "worse"]


def recommend_by_tag(config: RecommendConfig) -> str:
    """What a sweep recommended by, as its parent run's tag ``kbench.sweep.recommend_by`` (JSON)."""
    return json.dumps(config.model_dump(mode="json"), sort_keys=True)


def sweep_recommend_config(parent_tags: dict[str, str]) -> RecommendConfig | None:
    """The ``recommend`` section a sweep ended with (its parent's tag), or None for a sweep logged before it (or
    before the margin replaced the latency tie: its section no longer reads)."""
    text = parent_tags.get(tag.SWEEP_RECOMMEND_BY)
    if not text:
        return None
    try:
        return RecommendConfig(**json.loads(text))
    except (ValueError, TypeError):
        return None


def with_flags(config: RecommendConfig, flags: str, **given) -> RecommendConfig:
    """``config`` with the values a command line gave (None: not given); a margin without ``%`` read as a number.
    A bad value is one ConfigError line naming ``flags`` and what is wrong."""
    given = {k: v for k, v in given.items() if v is not None}
    if isinstance(given.get("margin"), str) and not given["margin"].strip().endswith("%"):
        try:
            given["margin"] = float(given["margin"])
        except ValueError:
            pass  # the section's check names both forms
    try:
        return RecommendConfig(**{**config.model_dump(), **given})
    except ValidationError as e:
        problems = "; ".join(format_error(err, "recommend", RecommendConfig) for err in e.errors())
        raise ConfigError(f"{flags}: {problems}") from None
