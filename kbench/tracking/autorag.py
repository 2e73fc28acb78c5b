"""A run in AutoRAG's layout: ``corpus.parquet``, ``qa.parquet`` and ``retrieval.parquet``.

``corpus.parquet`` (``doc_id``, ``contents``, ``metadata``) holds the passages the run ranked: the chunks
(level ``chunk``, metadata naming the document and character range) or the documents (level ``doc``).
``qa.parquet`` (``qid``, ``query``, ``retrieval_gt``, ``generation_gt``) holds the questions; ``retrieval_gt``
lists each relevant passage as its own group (``[[a], [b]]``: AutoRAG's inner lists are alternatives, the outer
list is what must be found), and ``generation_gt`` the reference texts of a span dataset (else empty).
``retrieval.parquet`` is the run as AutoRAG's retrieval node writes its result: ``qid``, ``query``,
``retrieved_ids``, ``retrieved_contents``, ``retrieve_scores``, best first.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from kbench.records import Chunk, Dataset, Run


def write_autorag(run: Run, dataset: Dataset, chunks: list[Chunk], qrels: dict[str, dict[str, int]],
                  out_dir: str | Path, level: str = "chunk") -> dict[str, Path]:
    """Write the three files; ``qrels`` at the same level as the passages (chunk or document ids)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if level == "chunk":
        contents = {c.chunk_id: c.text for c in chunks}
        corpus = pd.DataFrame({"doc_id": [c.chunk_id for c in chunks], "contents": [c.text for c in chunks],
                               "metadata": [{"document": c.doc_id, "start": c.start, "end": c.end} for c in chunks]})
    else:
        contents = {d.doc_id: d.text for d in dataset.documents}
        corpus = pd.DataFrame({"doc_id": [d.doc_id for d in dataset.documents],
                               "contents": [d.text for d in dataset.documents],
                               "metadata": [{"title": d.title} for d in dataset.documents]})
    documents = {d.doc_id: d.text for d in dataset.documents}
    qa, retrieval = [], []
    for query in dataset.queries:
        qid = query.query_id
        references = [documents[s.doc_id][s.start:s.end] for s in dataset.spans.get(qid, []) if s.doc_id in documents]
        qa.append({"qid": qid, "query": query.text,
                   "retrieval_gt": [[pid] for pid, grade in sorted(qrels.get(qid, {}).items()) if grade > 0],
                   "generation_gt": references})
        if level == "chunk":
            ranked = [(h.chunk_id, float(h.score)) for h in run.hits.get(qid, [])]
        else:
            ranked = list(run.to_dict("doc").get(qid, {}).items())
        retrieval.append({"qid": qid, "query": query.text, "retrieved_ids": [pid for pid, _ in ranked],
                          "retrieved_contents": [contents.get(pid, "") for pid, _ in ranked],
                          "retrieve_scores": [score for _, score in ranked]})
    paths = {"corpus": out / "corpus.parquet", "qa": out / "qa.parquet", "retrieval": out / "retrieval.parquet"}
    corpus.to_parquet(paths["corpus"], index=False)
    pd.DataFrame(qa).to_parquet(paths["qa"], index=False)
    pd.DataFrame(retrieval).to_parquet(paths["retrieval"], index=False)
    return paths
