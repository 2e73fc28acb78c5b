"""Comparing runs: per-query paired significance tests against a baseline, the ranking of configs with ties to
the best, and the HTML/Markdown report."""
from kbench.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".compare": ["CompareError", "Comparison", "RunScores", "compare_runs", "compare_scores", "headline_metric",
                 "load_runs"],
    ".report": ["ranking_lines", "summary_lines", "write_report"],
})
