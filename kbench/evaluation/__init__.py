"""Evaluation: metrics per query at document, chunk and span level, summaries and significance."""
