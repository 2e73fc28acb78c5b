"""Comparing runs: per-query paired significance tests against a baseline, the ranking of configs with ties to
the best, and the HTML/Markdown report."""
from kbench.compare.compare import (CompareError, Comparison, RunScores, compare_runs, compare_scores, headline_metric,
                                    load_runs)
from kbench.compare.report import ranking_lines, summary_lines, write_report

__all__ = ["CompareError", "Comparison", "RunScores", "compare_runs", "compare_scores", "headline_metric", "load_runs",
           "ranking_lines", "summary_lines", "write_report"]
