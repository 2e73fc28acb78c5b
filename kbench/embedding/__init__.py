"""Embedding: the offline model catalogue, encoders, and cached batch embedding."""
