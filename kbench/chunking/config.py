"""The chunking section: a strategy name plus that chunker's own knobs (validated by its params model)."""
from __future__ import annotations

from kbench.chunking.registry import CHUNKERS
from pydantic import Field

from kbench.registry import StrategySection


class ChunkingConfig(StrategySection):
    registry = CHUNKERS
    strategy: str = Field("fixed", description="the chunker (its knobs sit beside this key)")
