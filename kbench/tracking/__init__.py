"""Tracking: every run becomes an MLflow run."""
