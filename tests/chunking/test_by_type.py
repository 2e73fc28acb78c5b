"""by_type: documents routed by type, each sub-chunker's knobs configurable and validated."""
from __future__ import annotations

import pytest

from kbench.chunking import chunk_corpus
from kbench.config import ChunkingConfig
from kbench.datasets import load_dataset
from kbench.config import DatasetConfig


def test_demo_set_routes_code_to_ast_and_markdown_to_markdown():
    documents = load_dataset(DatasetConfig(name="demo")).documents
    config = ChunkingConfig(strategy="by_type", chunker_params={"ast": {"granularity": "method"}})
    chunks = chunk_corpus(documents, config)
    by_doc_type = {}
    types = {d.doc_id: d.doc_type for d in documents}
    for c in chunks:
        by_doc_type.setdefault(types[c.doc_id], set()).add(c.metadata["chunker"])
    assert by_doc_type == {"code": {"ast"}, "markdown": {"markdown"}}
    code = next(c for c in chunks if c.metadata["chunker"] == "ast")
    assert code.metadata["chunker_params"]["granularity"] == "method"
    assert code.metadata["routed_by"] == "by_type"
    assert config.model_dump()["chunker_params"]["markdown"]["max_depth"] == 3  # defaults filled in


def test_bad_routes_and_knobs_are_refused_with_the_chunker_named():
    with pytest.raises(ValueError, match="routes/default: unknown chunker 'nope'; allowed: ast, "):
        ChunkingConfig(strategy="by_type", routes={"code": "nope"})
    with pytest.raises(ValueError, match="chunker_params.ast.granularity: Input should be 'file', 'class'"):
        ChunkingConfig(strategy="by_type", chunker_params={"ast": {"granularity": "module"}})
    with pytest.raises(ValueError, match="chunker_params.markdown.depth: unknown knob of markdown; allowed: max_depth"):
        ChunkingConfig(strategy="by_type", chunker_params={"markdown": {"depth": 2}})
    with pytest.raises(ValueError, match="fallback: unknown chunker 'nope'"):
        ChunkingConfig(strategy="ast", fallback="nope")
    with pytest.raises(ValueError, match="fallback_params.chunk_size: Input should be greater than or equal to 1"):
        ChunkingConfig(strategy="endpoint", fallback_params={"chunk_size": -1})
    with pytest.raises(ValueError, match="not used by routes"):
        ChunkingConfig(strategy="by_type", chunker_params={"smart": {"chunk_size": 10}})
