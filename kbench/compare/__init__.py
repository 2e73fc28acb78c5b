"""Comparing runs: per-query paired significance tests against a baseline, and the HTML/Markdown report."""
from kbench.compare.compare import CompareError, Comparison, RunScores, compare_runs, compare_scores, load_runs
from kbench.compare.report import summary_lines, write_report

__all__ = ["CompareError", "Comparison", "RunScores", "compare_runs", "compare_scores", "load_runs", "summary_lines",
           "write_report"]
