"""``bi_encoder``: rescore the first stage's candidates with a second, stronger embedding model.

The cheap model (MiniLM) searches the whole corpus; the strong one (all-mpnet-base-v2, 1–4 passages/s
on 2 cores) embeds only the candidates, so its cost grows with queries x candidates, not corpus size.
Candidate vectors go through the workspace's embedding cache (the same content-addressed cache as the
embedding stage), so a chunk is embedded by the strong model at most once across queries and runs.
The new score is the cosine of the strong model's query and chunk vectors.
"""
from __future__ import annotations

import numpy as np
from pydantic import Field

from kbench.embedding.config import EmbeddingConfig
from kbench.embedding.models import resolve_model_path
from kbench.embedding.stage import CachedEmbedder
from kbench.records import Hit
from kbench.registry import in_unit
from kbench.retrieval.contracts import Reranker, SearchContext
from kbench.retrieval.registry import RERANKERS
from kbench.retrieval.rerank.common import CandidateParams, apply_scores, split_candidates

FAILED_SCORE = -2.0  # below any cosine: a candidate the strong model could not embed sinks to the bottom


class BiEncoderParams(CandidateParams):
    model: str = Field("all-mpnet-base-v2", description="catalogue name (kbench models list) or a local folder")
    batch_size: int = Field(16, ge=1, description="texts per encode call", json_schema_extra=in_unit("texts"))
    max_seq_length: int | None = Field(None, ge=8, description="tokens; default: the model's own",
                                       json_schema_extra=in_unit("tokens"))
    query_prefix: str = Field("", description="text put before every query for this model")
    document_prefix: str = Field("", description="text put before every candidate for this model")


@RERANKERS.register("bi_encoder", BiEncoderParams)
class BiEncoderReranker(Reranker):
    """Rescore candidates by cosine under a second embedding model (e.g. mpnet over MiniLM's candidates)."""

    @staticmethod
    def preflight(params: BiEncoderParams) -> None:
        resolve_model_path(params.model)

    def __init__(self, context: SearchContext, params: BiEncoderParams):
        self.context, self.params = context, params
        config = EmbeddingConfig(model=params.model, batch_size=params.batch_size, max_seq_length=params.max_seq_length,
                                 query_prefix=params.query_prefix, document_prefix=params.document_prefix,
                                 backend="torch")  # rerank has no backend knob for it: torch, as ever
        self.embedder = CachedEmbedder(config, context.workspace / "cache")
        self.cache_hits = self.cache_misses = 0  # over the run, for a notebook to check reuse

    def rerank(self, query_text: str, hits: list[Hit], top_k: int) -> list[Hit]:
        candidates, tail = split_candidates(hits, self.params.max_candidates)
        if not candidates:
            return apply_scores(candidates, [], top_k, tail)
        embedded = self.embedder.embed([self.context.chunks[h.chunk_index].text for h in candidates])
        self.cache_hits += embedded.cache_hits
        self.cache_misses += embedded.cache_misses
        query = self.embedder.embed_queries([query_text])[0]
        scores = embedded.vectors @ query
        scores[~embedded.ok_mask] = FAILED_SCORE
        return apply_scores(candidates, np.asarray(scores, dtype=float).tolist(), top_k, tail)
