"""``by_type``: pick the chunker per document type, as the GWI spec's content sources do.

The GWI spec configures code with ``ast_aware``, markdown with ``semantic`` and OpenAPI specs with
``endpoint``; here that is ``routes: {code: ast, markdown: markdown, html: markdown, openapi: endpoint}``
(HTML is stored converted to markdown) and every other type (text, pdf, docx) goes to ``default``.
``chunker_params`` holds the knobs of each chunker used, validated by that chunker's own model; the
resolved config lists them with defaults filled. Each chunk records the chunker that made it.
Size limit: that of the chunker chosen for the document.
"""
from __future__ import annotations

from typing import Any

from pydantic import Field, PrivateAttr, model_validator

from kbench.chunking.nested import nested_params
from kbench.chunking.registry import CHUNKERS
from kbench.records import Chunk, Document
from kbench.registry import StrictModel

GWI_SPEC_ROUTES = {"code": "ast", "markdown": "markdown", "html": "markdown", "openapi": "endpoint"}


class ByTypeParams(StrictModel):
    routes: dict[str, str] = Field(default_factory=lambda: dict(GWI_SPEC_ROUTES),
                                   description="document type -> chunker name")
    default: str = Field("recursive", description="chunker for document types not in routes")
    chunker_params: dict[str, dict[str, Any]] = Field(default_factory=dict, description="chunker name -> its knobs")
    _models: dict[str, StrictModel] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _check_chunkers(self):
        used = sorted(set(self.routes.values()) | {self.default})
        if "by_type" in used:
            raise ValueError("by_type cannot route to itself")
        unused = sorted(set(self.chunker_params) - set(used))
        if unused:
            raise ValueError(f"chunker_params: {unused} are not used by routes or default (used: {used})")
        models = {name: nested_params(name, self.chunker_params.get(name, {}), "routes/default",
                                      f"chunker_params.{name}") for name in used}
        self.__dict__["chunker_params"] = {name: model.model_dump() for name, model in models.items()}
        self._models = models
        return self


@CHUNKERS.register("by_type", ByTypeParams)
def by_type_chunks(document: Document, params: ByTypeParams) -> list[Chunk]:
    """Route each document to a chunker by its type (code -> ast, markdown -> markdown, openapi -> endpoint)."""
    name = params.routes.get(document.doc_type, params.default)
    sub = params._models[name]
    chunks = CHUNKERS.get(name).impl(document, sub)
    for chunk in chunks:
        chunk.metadata.setdefault("chunker", name)
        chunk.metadata.setdefault("chunker_params", params.chunker_params[name])
        chunk.metadata["routed_by"] = "by_type"
    return chunks
