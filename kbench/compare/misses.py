"""The queries a logged run missed: the question, its reference text and what the run returned instead.

    from kbench.compare.misses import read_misses
    found = read_misses("<run id>")          # found.misses: one Miss per missed query

Everything is rebuilt from what the run logged, with no code from the user: its per-query scores
(``per_query.parquet``: metrics, the ``retrieved`` chunk ids and their ``scores``) and its resolved config
(``config.yaml``), whose dataset section (with its sample: max_queries, seed) and chunking section give back
the questions, the references and the chunk texts.

A miss is a query whose recall at the headline's level and k is 0: none of its relevant items is in the
top k. The headline is nDCG@10 of the finest level the run scored (chunk for span datasets, where a
relevant chunk is one overlapping a reference span under the run's evaluation.overlap rule; doc for qrels
datasets, where a relevant document has a positive grade), so a miss is also a query whose headline
nDCG@k is 0. Queries with nothing relevant to find (recall NaN) are no misses and are counted apart.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from kbench.compare.compare import headline_metric
from kbench.config import ConfigError, validate_experiment
from kbench.evaluation.spans import reference_table
from kbench.paths import workspace_dir
from kbench.pipeline import chunked_dataset
from kbench.tracking.read import RunReadError, artifact_source, find_run, read_config, read_per_query, tracking_client


@dataclass
class Reference:
    """What the query should have found: a reference span (span datasets) or a relevant document (qrels)."""

    doc_id: str
    text: str
    start: int | None = None  # span datasets: the reference's characters [start, end) of the document
    end: int | None = None
    hit_rank: int | None = None  # rank of the first retrieved chunk that hits it (0: none in the top max(k))
    covered: float | None = None  # fraction of its characters inside the retrieved chunks (top max(k))
    grade: int | None = None  # qrels datasets: the document's relevance grade


@dataclass
class Returned:
    rank: int
    chunk_id: str
    doc_id: str
    score: float
    text: str  # the chunk's text ("" when the dataset no longer has it)


@dataclass
class Miss:
    query_id: str
    question: str
    references: list[Reference]
    returned: list[Returned]  # what the run ranked first instead


@dataclass
class Misses:
    run_id: str
    run_name: str
    metric: str  # the recall column that decides a miss, e.g. chunk_recall_at_10
    k: int
    level: str  # chunk | doc
    n_queries: int
    n_without_reference: int  # queries with nothing relevant to find: never a miss
    misses: list[Miss] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def definition(self) -> str:
        what = ("no chunk overlapping a reference span" if self.level == "chunk" else "no relevant document")
        return f"{self.metric} = 0: {what} in the top {self.k}"


def miss_metric(per_query: pd.DataFrame, k: int | None = None) -> tuple[str, str, int]:
    """(recall column, level, k) that decides a miss: the headline's level and k (or ``k``)."""
    numeric = [c for c in per_query.columns if per_query[c].dtype.kind in "fi"]
    headline = headline_metric(numeric)
    if headline is None:
        raise RunReadError(f"per_query.parquet has no chunk or doc metrics (columns: {list(per_query.columns)})")
    level = headline.split("_", 1)[0]
    k = k or int(headline.rsplit("_", 1)[1])
    metric = f"{level}_recall_at_{k}"
    if metric not in per_query:
        ks = sorted(int(c.rsplit("_", 1)[1]) for c in numeric if c.startswith(f"{level}_recall_at_"))
        raise RunReadError(f"the run was not scored at k={k} ({level}_recall_at_{k}); its k: {ks}")
    return metric, level, k


def read_misses(run_id: str, *, tracking_uri: str | None = None, k: int | None = None,
                returned: int = 3) -> Misses:
    """The queries run ``run_id`` (a full id or a unique start of one) missed, in the run's query order, each
    with its references and the first ``returned`` results; ``k`` overrides the headline's k."""
    client = tracking_client(tracking_uri)
    run = find_run(client, run_id)
    per_query, source = read_per_query(client, run)
    metric, level, k = miss_metric(per_query, k)
    recall = per_query[metric]
    missed = per_query[recall == 0]
    out = Misses(run.info.run_id, run.data.tags.get("mlflow.runName", source), metric, k, level, len(per_query),
                 int(recall.isna().sum()))
    if missed.empty:
        return out
    try:
        config = read_config(client, run)
    except Exception as e:
        raise RunReadError(f"run {run.info.run_id}: cannot read config.yaml from run {artifact_source(run)}'s "
                           f"artifacts ({type(e).__name__}); was it logged by kbench?") from None
    try:
        experiment = validate_experiment(config, f"run {artifact_source(run)} config.yaml")
    except ConfigError as e:
        raise RunReadError(f"the config this run was logged with no longer validates, so its dataset cannot be "
                           f"rebuilt: {e}") from None
    cache = workspace_dir(experiment.workspace) / "cache"
    dataset, chunks = chunked_dataset(experiment.dataset, experiment.chunking,
                                     cache_dir=cache if cache.is_dir() else None)
    questions = {q.query_id: q.text for q in dataset.queries}
    chunk_text = {c.chunk_id: c.text for c in chunks}
    documents = {d.doc_id: d for d in dataset.documents}
    references = _references(missed, dataset) if dataset.has_spans else {}
    lost = 0
    for query_id, row in missed.iterrows():
        query_id = str(query_id)
        if query_id not in questions:
            lost += 1
        if not dataset.has_spans:
            grades = dataset.qrels.get(query_id, {})
            refs = [Reference(doc_id, _document_text(documents.get(doc_id)), grade=grade)
                    for doc_id, grade in sorted(grades.items(), key=lambda item: -item[1]) if grade > 0]
        else:
            refs = references.get(query_id, [])
        top = [Returned(rank, chunk_id, chunk_id.rsplit("#", 1)[0], float(score), chunk_text.get(chunk_id, ""))
               for rank, (chunk_id, score) in enumerate(zip(list(row["retrieved"])[:returned],
                                                            list(row["scores"])[:returned]), start=1)]
        out.misses.append(Miss(query_id, questions.get(query_id, ""), refs, top))
    if lost:
        out.notes.append(f"{lost} missed queries are not in the dataset rebuilt from the run's config: "
                         "the dataset changed since the run")
    if any(not r.text for m in out.misses for r in m.returned):
        out.notes.append("some returned chunks are not in the chunks rebuilt from the run's config (the dataset "
                         "or the chunker changed since the run): their text is left empty")
    return out


def _references(missed: pd.DataFrame, dataset) -> dict[str, list[Reference]]:
    table = reference_table(missed.reset_index(), dataset)
    out: dict[str, list[Reference]] = {}
    for r in table.itertuples():
        out.setdefault(str(r.query_id), []).append(
            Reference(r.doc_id, r.text, r.start, r.end, None if pd.isna(r.hit_rank) else int(r.hit_rank),
                      float(r.covered)))
    return out


def _document_text(document) -> str:
    if document is None:
        return ""
    return f"{document.title}\n{document.text}".strip() if document.title else document.text


__all__ = ["Miss", "Misses", "Reference", "Returned", "miss_metric", "read_misses"]
