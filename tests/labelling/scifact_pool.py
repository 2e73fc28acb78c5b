"""A real pool for the labelling tests and the benchmark: SciFact's 300 test claims, the top 10 of two BM25
configs (bm25s over title + abstract, k1 1.2 b 0.75; over the abstract alone, k1 0.9 b 0.4), and SciFact's own
qrels as the human's grades (1 relevant, 0 every other pooled abstract)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from kbench.paths import shared_datasets_dir

SCIFACT = shared_datasets_dir() / "scifact"
CONFIGS = {"bm25-title-abstract": ("title", 1.2, 0.75), "bm25-abstract": ("", 0.9, 0.4),
           "bm25-title-abstract-b09": ("title", 1.5, 0.9)}


@dataclass(frozen=True)
class ScifactPool:
    configs: list[str]
    question_ids: list[str]
    question_of: np.ndarray  # [P]
    doc_of: list[str]  # [P]
    ranks: np.ndarray  # [C, P]
    human: np.ndarray  # [P]: SciFact's qrels grade, 0 for every pooled abstract they do not grade


@lru_cache(maxsize=None)
def rankings(configs: tuple[str, ...], k: int = 10) -> tuple[list[str], dict[str, list[list[str]]],
                                                               dict[str, dict[str, int]]]:
    import bm25s

    docs = [json.loads(line) for line in (SCIFACT / "corpus.jsonl").open(encoding="utf-8")]
    queries = {q["_id"]: q["text"] for q in map(json.loads, (SCIFACT / "queries.jsonl").open(encoding="utf-8"))}
    qrels: dict[str, dict[str, int]] = {}
    for line in (SCIFACT / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        q, d, grade = line.split("\t")
        qrels.setdefault(q, {})[d] = int(grade)
    qids = sorted(qrels, key=int)
    ids = [d["_id"] for d in docs]
    query_tokens = bm25s.tokenize([queries[q] for q in qids], stopwords="en", show_progress=False)
    out = {}
    for name in configs:
        title, k1, b = CONFIGS[name]
        texts = [(d["title"] + " " if title else "") + d["text"] for d in docs]
        retriever = bm25s.BM25(k1=k1, b=b)
        retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
        found, _ = retriever.retrieve(query_tokens, k=k, show_progress=False)
        out[name] = [[ids[j] for j in row] for row in found]
    return qids, out, qrels


def scifact_pool(configs: tuple[str, ...] = ("bm25-title-abstract", "bm25-abstract"), k: int = 10) -> ScifactPool:
    qids, ranked, qrels = rankings(tuple(configs), k)
    question_of, doc_of, index = [], [], {}
    for qi, q in enumerate(qids):
        for name in configs:
            for d in ranked[name][qi]:
                if (qi, d) not in index:
                    index[(qi, d)] = len(doc_of)
                    question_of.append(qi)
                    doc_of.append(d)
    ranks = np.zeros((len(configs), len(doc_of)), dtype=int)
    for c, name in enumerate(configs):
        for qi in range(len(qids)):
            for rank, d in enumerate(ranked[name][qi], start=1):
                ranks[c, index[(qi, d)]] = rank
    human = np.array([qrels[qids[q]].get(d, 0) for q, d in zip(question_of, doc_of)], dtype=float)
    return ScifactPool(list(configs), qids, np.array(question_of), doc_of, ranks, human)
