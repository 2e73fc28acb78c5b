"""Building the indexes a run's legs search, one way for every kind.

``build_index(spec, dataset, sections, ...)`` makes one ``Index``:

1. its unit kind makes the units and what to embed for each (kbench/indexes/kinds); the run's own chunks
   (index ``chunk``) are the run's chunking, their text enriched by an LLM when ``enrichment`` is on;
2. when a leg on it reads vectors, the units are embedded through the embedding cache;
3. the vectors are kept: the run's chunks where ``store.backend`` keeps them (FAISS, the DuckDB mirror,
   pgvector; with a recall check of an approximate index), any other index in memory (FAISS of the run's
   ``store.index`` type); a kind may also write its index where production keeps it (``UnitKind.mirror``).

A live production store gives the run its chunk index as stored (``stored_index``): its rows and vectors, searched
by production's own SQL; the other indexes are built from the documents it holds, as for any dataset.

Stage names (``time_s_*``) and counts (``count_*``) are the run's: ``chunk``, ``enrich``, ``embed``, ``store``,
``index_recall`` for the run's chunks; ``units``/``embed_units`` and ``units_<index>_*`` for every other index.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from kbench.chunking import chunk_dataset
from kbench.embedding.stage import CachedEmbedder, EmbeddingResult
from kbench.enrichment import enrich_chunks
from kbench.errors import RunError
from kbench.indexes.index import CHUNK, BuildLog, Index, IndexSections, IndexSpec, Units
from kbench.indexes.registry import UNIT_KINDS
from kbench.records import Chunk, Dataset
from kbench.store.faiss_index import VectorIndex
from kbench.store.outcome import StoredCorpus, StoreOutcome
from kbench.store.stage import index_recall, needs_recall_check, prepare_store
from kbench.store.sync import make_collection


def build_indexes(specs: list[IndexSpec], dataset: Dataset, sections: IndexSections, *, workspace: Path,
                  log: BuildLog, embedder: CachedEmbedder | None = None, given: dict[str, Index] | None = None,
                  keep: bool = True, progress: bool = True) -> dict[str, Index]:
    """Every index ``specs`` name, by name, in order; ``given`` ones (a live store's chunks) are used as they are.
    If one fails, those it built are closed (the caller closes what it gave)."""
    given = given or {}
    built: dict[str, Index] = {}
    try:
        for spec in specs:
            if spec.name not in given:
                built[spec.name] = build_index(spec, dataset, sections, workspace=workspace, log=log,
                                               embedder=embedder, keep=keep, progress=progress)
    except BaseException:
        close_all(built)
        raise
    return {spec.name: given.get(spec.name) or built[spec.name] for spec in specs}


def build_index(spec: IndexSpec, dataset: Dataset, sections: IndexSections, *, workspace: Path, log: BuildLog,
                embedder: CachedEmbedder | None = None, keep: bool = True, progress: bool = True) -> Index:
    """One index (see the module doc). ``embedder`` is needed when ``spec.embed``; ``keep=False`` stops after
    embedding (a benchmark that builds its own vector indexes)."""
    made = make_units(spec, dataset, sections, log, workspace / "cache")
    made_by: dict = {"kind": spec.kind}
    if spec.chunking is not None:
        made_by["chunking"] = spec.chunking.model_dump(mode="json")
    if not spec.embed:
        return Index(spec.name, made.units, made_by=made_by)
    if embedder is None:
        raise ValueError(f"index {spec.name!r}: a leg on it reads vectors, so it needs an embedder")
    made_by.update(model=embedder.fingerprint, embedding_namespace=embedder.cache.namespace)
    embedded = embed_units(spec.name, made, embedder, log, progress)
    if not keep:
        return Index(spec.name, made.units, embedded, made_by=made_by)
    if spec.name == CHUNK:
        return kept_in_store(made.units, embedded, dataset, sections, embedder, workspace, log, made_by)
    ok = np.flatnonzero(embedded.ok_mask)
    index = Index(spec.name, made.units, embedded, VectorIndex.build(embedded.vectors[ok], sections.store, ids=ok),
                  made_by=made_by)
    UNIT_KINDS.get(spec.kind).impl().mirror(index, dataset, sections, log, workspace)
    return index


def make_units(spec: IndexSpec, dataset: Dataset, sections: IndexSections, log: BuildLog, cache_root: Path) -> Units:
    """The units of ``spec``: the run's chunks (enriched text to embed when enrichment is on) or its kind's units,
    their ids labelled with the index's name."""
    if spec.name == CHUNK:
        chunks = chunk_dataset(dataset, sections.chunking, cache_dir=cache_root, timer=log.timer, counts=log.counts)
        if not (spec.embed and sections.enrichment.enabled):
            return Units(chunks)
        with log.timer.stage("enrich"):  # kbench.enrichment: LLM context + "\n---\n" + chunk
            enriched = enrich_chunks(chunks, dataset.documents, sections.enrichment, cache_root,
                                     policy=sections.llm_policy, meter=log.meter)
        log.counts.update(enriched.counts())
        return Units(chunks, enriched.texts)
    made = UNIT_KINDS.get(spec.kind).impl().build(spec, dataset, sections, log, cache_root)
    if not made.units:
        raise RunError(f"index {spec.name!r} ({spec.kind}) has no units in {len(dataset.documents)} documents; "
                       "check the dataset, or search another unit")
    return Units(labelled(made.units, spec.name), made.texts)


def labelled(units: list[Chunk], name: str) -> list[Chunk]:
    """Units whose ids carry the index's name (``doc#<name>:<n>``), never the id of one of the run's chunks."""
    return [u if u.unit == name else replace(u, unit=name) for u in units]


def embed_units(name: str, made: Units, embedder: CachedEmbedder, log: BuildLog, progress: bool) -> EmbeddingResult:
    """Embed through the cache, timed and counted (the run's chunks as ``embed``/``embeddings_*``)."""
    own = name == CHUNK
    with log.timer.stage("embed" if own else "embed_units"):
        embedded = embedder.embed(made.embed_texts(), progress=progress, stage="embed" if own else f"embed {name}")
    prefix = "" if own else f"units_{name}_"
    log.counts.update({f"{prefix}embeddings_computed": embedded.cache_misses,
                       f"{prefix}embeddings_cached": embedded.cache_hits,
                       f"{prefix}embeddings_failed": len(embedded.failed)})
    if own:
        log.counts["embedding_dimension"] = int(embedded.vectors.shape[1])
    return embedded


def kept_in_store(chunks: list[Chunk], embedded: EmbeddingResult, dataset: Dataset, sections: IndexSections,
                  embedder: CachedEmbedder, workspace: Path, log: BuildLog, made_by: dict) -> Index:
    """The run's chunks in ``store.backend`` (kbench/store/backends), under their collection's name."""
    collection = make_collection(sections.dataset, sections.chunking, sections.enrichment, sections.embedding.model,
                                 embedder.cache.namespace, embedded.vectors.shape[1])
    with log.timer.stage("store"):
        stored = prepare_store(sections.store, collection, dataset, chunks, embedded, workspace)
    log.counts.update(stored.counts)
    try:
        metrics = checked_recall(stored, dataset, embedder, sections, log)
    except BaseException:
        stored.close()
        raise
    return Index(CHUNK, chunks, embedded, stored.vector_index, stored.handle, made_by, metrics, stored.close)


def stored_index(stored: StoredCorpus, dataset: Dataset, sections: IndexSections, embedder: CachedEmbedder | None,
                 log: BuildLog) -> Index:
    """A live store's rows as the run's chunk index: vectors as stored (queries embedded by the model the rows
    name), searched by the store. Its dimension must be the encoder's."""
    made_by = {"kind": "stored", "model": stored.embedding_model}
    try:
        metrics: dict[str, float] = {}
        if embedder is not None:
            width = stored.vectors.shape[1]
            if embedder.dimension is not None and embedder.dimension != width:
                raise RunError(f"the store's rows are {width}-d vectors of {stored.embedding_model!r} but that "
                               f"model embeds queries in {embedder.dimension} dimensions here; check "
                               "embedding.dimension")
            log.counts.update(embeddings_computed=0, embeddings_cached=0, embedding_dimension=int(width))
            embedder.calibrate([c.text for c in stored.chunks])  # openvino-int8 embeds queries calibrated on the rows
            metrics = checked_recall(stored.outcome, dataset, embedder, sections, log)
    except BaseException:
        stored.outcome.close()
        raise
    return Index(CHUNK, stored.chunks, EmbeddingResult(stored.vectors), stored.outcome.vector_index,
                 stored.outcome.handle, made_by, metrics, stored.outcome.close)


def checked_recall(outcome: StoreOutcome, dataset: Dataset, embedder: CachedEmbedder, sections: IndexSections,
                   log: BuildLog) -> dict[str, float]:
    """recall@k of an approximate store index against exact search on a sample of the questions ({} if exact)."""
    if not needs_recall_check(sections.store, outcome):
        return {}
    with log.timer.stage("index_recall"):
        return index_recall(outcome, dataset.queries, embedder.embed_queries, sections.store)


def close_all(indexes: dict[str, Index]) -> None:
    for index in indexes.values():
        index.close()
