"""Tracking: the run folder, MLflow logging, tag names, reading runs back, TREC/ranx formats.

Kept free of imports: ``kbench.config`` imports ``kbench.tracking.config`` (the section model), which runs
this file first.
"""
