"""BEIR layout: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv`` (header line, query-id corpus-id score)."""
from __future__ import annotations

import csv
import json
from pathlib import Path

from kbench.records import Dataset, Document, Query


class DatasetError(ValueError):
    pass


def is_beir_folder(path: Path) -> bool:
    return (path / "corpus.jsonl").is_file() and (path / "queries.jsonl").is_file()


def _read_jsonl(path: Path) -> list[dict]:
    rows = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise DatasetError(f"{path}:{n}: not valid JSON ({e.msg})") from None
    return rows


def load_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.reader(f, delimiter="\t")
        for n, row in enumerate(reader, start=1):
            if n == 1 and row and not row[-1].lstrip("-").isdigit():
                continue  # header
            if len(row) < 3:
                continue
            qrels.setdefault(row[0], {})[row[1]] = int(row[2])
    return qrels


def load_beir(path: Path, split: str = "test", name: str | None = None) -> Dataset:
    qrels_file = path / "qrels" / f"{split}.tsv"
    if not qrels_file.is_file():
        splits = sorted(p.stem for p in (path / "qrels").glob("*.tsv"))
        raise DatasetError(f"dataset.split: no qrels/{split}.tsv in {path}; available splits: {splits or 'none'}")
    qrels = load_qrels(qrels_file)
    documents = [
        Document(doc_id=str(r["_id"]), text=r.get("text") or "", title=r.get("title") or "",
                 url=str(r["_id"]), doc_type="text", metadata=r.get("metadata") or {})
        for r in _read_jsonl(path / "corpus.jsonl")
    ]
    queries = [
        Query(str(r["_id"]), r["text"]) for r in _read_jsonl(path / "queries.jsonl") if str(r["_id"]) in qrels
    ]
    return Dataset(name or path.name, documents, queries, qrels=qrels)
