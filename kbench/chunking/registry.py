"""Chunker registry: config name -> function(document, params) -> list[Chunk], one module each.

A new chunker is a module in this folder that registers itself (``@CHUNKERS.register(name, Params)``) and its line
in ``CHUNKERS`` below, which imports the module when the name is first used (kbench/registry.py)."""
from __future__ import annotations

from typing import Callable

from kbench.records import Chunk, Document
from kbench.registry import Registry

ChunkerFn = Callable[[Document, object], list[Chunk]]

CHUNKERS: Registry[ChunkerFn] = Registry("chunking.strategy", {
    "ast": "kbench.chunking.ast",
    "by_type": "kbench.chunking.by_type",
    "endpoint": "kbench.chunking.endpoint",
    "fixed": "kbench.chunking.fixed",
    "fixed_tokens": "kbench.chunking.fixed_tokens",
    "markdown": "kbench.chunking.markdown",
    "none": "kbench.chunking.none",
    "paragraph": "kbench.chunking.paragraph",
    "recursive": "kbench.chunking.recursive",
    "smart": "kbench.chunking.smart",
})
