"""Chunker registry: config name -> function(document, params) -> list[Chunk]."""
from __future__ import annotations

from typing import Callable

from kbench.records import Chunk, Document
from kbench.registry import Registry

ChunkerFn = Callable[[Document, object], list[Chunk]]

CHUNKERS: Registry[ChunkerFn] = Registry("chunking.strategy")
