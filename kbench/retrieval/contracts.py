"""What a leg, a fusion and a reranker must provide, checked when one registers (kbench.retrieval.registry).

- A **leg** subclasses ``Leg``: built once per run as ``Leg(context, params)``, it declares
  ``needs_query_vectors`` (whether ``search`` reads query embeddings, so the corpus must be embedded) and
  ``search(queries, query_vectors, k, mask)`` returns, per query, ``[(chunk_index, score), ...]`` best first.
- A **fusion** is a function ``fuse(leg_results, params, top_k) -> list[Hit]`` for one query, where
  ``leg_results`` maps leg name to that leg's ranked list. Its params subclass ``FusionParams``, whose
  ``check_legs`` refuses a leg list the method cannot fuse and ``leg_depth`` says how deep each leg must go.
  A fusion whose params say ``wants_unreturned_scores()`` is also given ``unreturned``: per leg, its own score
  of each candidate another leg returned and it did not (``Leg.score``; legs that can declare
  ``scores_any_unit``).
- A **reranker** subclasses ``Reranker``: built once per run as ``Reranker(context, params)``,
  ``rerank(query_text, hits, top_k)`` rescores one query's candidates, and ``preflight(params)`` fails at
  start time when it cannot run. Its params subclass ``RerankParams`` (``candidate_multiplier``).
"""
from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Protocol

from pydantic import Field

from kbench.llm.config import LLMPolicy
from kbench.llm.usage import UsageMeter
from kbench.records import Chunk, Hit, Query
from kbench.registry import StrictModel

if TYPE_CHECKING:  # annotations only: `kbench list` reads the registries that import this module
    import numpy as np

    from kbench.indexes import Index
    from kbench.store.outcome import StoreHandle, VectorSearch

LegResult = list[tuple[int, float]]


@dataclass(frozen=True)
class SearchContext:
    """What one leg or reranker may use: the units it searches (one index, kbench/indexes), their vectors and what
    searches them, plus what every leg of the run shares: the query encoder, the workspace, the LLM policy and
    meter, the documents' types. ``on(index)`` is the same run's context over another index."""

    chunks: list[Chunk]
    chunk_vectors: np.ndarray | None = None  # (n_chunks, dim), L2-normalized, row i = chunks[i]
    vector_index: VectorSearch | None = None  # FAISS over chunk_vectors, or pgvector's SQL search
    embed_queries: Callable[[list[str]], np.ndarray] | None = None
    workspace: Path = Path("experiments")
    store: StoreHandle | None = None  # the production-shaped store (duckdb, pgvector); None for in-memory faiss
    llm_policy: LLMPolicy = field(default_factory=LLMPolicy)  # retries/concurrency of LLM stages (config llm.policy)
    llm_meter: UsageMeter = field(default_factory=UsageMeter)  # the run's LLM token/request counts
    doc_types: dict[str, str] = field(default_factory=dict)  # doc_id -> Document.doc_type (per-type analyzers)
    time_queries: Callable[[list[str]], float | None] | None = None  # s/question, never cached (latency: batch)

    def on(self, index: Index) -> "SearchContext":
        """This context over ``index``: its units, vectors, vector index and store."""
        return replace(self, chunks=index.units, chunk_vectors=index.vectors, vector_index=index.vector_index,
                       store=index.store)


class Leg(ABC):
    needs_query_vectors: ClassVar[bool]  # every leg declares it; registration refuses one that does not
    fixed_unit: ClassVar[str | None] = None  # a leg that always searches units another stage builds (code_example)
    scores_any_unit: ClassVar[bool] = False  # whether ``score`` gives any unit's score (a fusion may ask for it)

    @staticmethod
    def preflight(params: Any) -> None:
        """Fail before any work when the leg cannot run (a stemmer's package missing); default: it can."""

    @abstractmethod
    def __init__(self, context: SearchContext, params: Any) -> None: ...

    @abstractmethod
    def search(self, queries: list[Query], query_vectors: np.ndarray | None, k: int,
               mask: np.ndarray | None = None) -> list[LegResult]:
        """Per query, at most ``k`` (chunk index, score) best first, only chunks where ``mask`` is True."""

    def score(self, queries: list[Query], query_vectors: np.ndarray | None,
              rows: list[np.ndarray]) -> list[np.ndarray]:
        """Per query, this leg's score of each unit in ``rows[i]``, returned by ``search`` or not (the score its
        ranking function gives that unit). Only legs that declare ``scores_any_unit``."""
        raise NotImplementedError(f"{type(self).__name__} cannot score units it did not return")


class FusionParams(StrictModel):
    """Base of every fusion's params: by default any legs fuse and each leg returns ``match_count``."""

    def check_legs(self, legs: list[str]) -> None:
        """Raise ValueError naming ``retrieval.legs`` when this method cannot fuse ``legs``."""

    def wants_unreturned_scores(self) -> bool:
        """Whether the fusion needs each leg's score of the candidates it did not return (``Leg.score``)."""
        return False

    def leg_depth(self, match_count: int) -> int:
        """How many results each leg must return for the fusion to keep ``match_count``."""
        return match_count


class Fusion(Protocol):
    def __call__(self, leg_results: dict[str, LegResult], params: FusionParams, top_k: int) -> list[Hit]: ...


class RerankParams(StrictModel):
    """Base of every reranker's params."""

    candidate_multiplier: int = Field(1, ge=1, description="fetch top_k x this many first-stage results to rerank")


class Reranker(ABC):
    @staticmethod
    def preflight(params: RerankParams) -> list | None:
        """Fail before any work when the reranker cannot run (model missing, endpoint unset); default: it can.
        A reranker that asks a model over HTTP returns its ``Endpoint``s, which the pipeline then checks answer."""

    @abstractmethod
    def __init__(self, context: SearchContext, params: RerankParams) -> None: ...

    @abstractmethod
    def rerank(self, query_text: str, hits: list[Hit], top_k: int) -> list[Hit]:
        """The best ``top_k`` of ``hits`` (one query's candidates, best first) after rescoring."""

    def start(self, queries: int) -> None:
        """Called once before the first ``rerank``, with how many queries follow (an LLM reranker's progress)."""

    def finish(self) -> None:
        """Called once after the last ``rerank`` (an LLM reranker checks how many answers it could use)."""


class ContractError(TypeError):
    """A strategy registered without what its stage calls: a programming error, raised at import time."""


def _require_class(field: str, name: str, impl: Any, base: type) -> None:
    if not (isinstance(impl, type) and issubclass(impl, base)):
        raise ContractError(f"{field}: {name!r} must subclass {base.__module__}.{base.__name__}; got {impl!r}")
    if inspect.isabstract(impl):
        raise ContractError(f"{field}: {name!r} does not implement {', '.join(sorted(impl.__abstractmethods__))}")


def _require_params(field: str, name: str, params: type, base: type) -> None:
    if not issubclass(params, base):
        raise ContractError(f"{field}: the params of {name!r} ({params.__name__}) must subclass "
                            f"{base.__module__}.{base.__name__}")


def require_leg(field: str, name: str, impl: Any, params: type) -> None:
    _require_class(field, name, impl, Leg)
    if not isinstance(inspect.getattr_static(impl, "needs_query_vectors", None), bool):
        raise ContractError(f"{field}: {name!r} must declare needs_query_vectors = True or False")


def require_fusion(field: str, name: str, impl: Any, params: type) -> None:
    if not callable(impl):
        raise ContractError(f"{field}: {name!r} must be a function fuse(leg_results, params, top_k); got {impl!r}")
    _require_params(field, name, params, FusionParams)


def require_reranker(field: str, name: str, impl: Any, params: type) -> None:
    _require_class(field, name, impl, Reranker)
    _require_params(field, name, params, RerankParams)
